// bind: the single entry point of every primitive application — to the innermost active trace
// when tracing, to the backends otherwise — and the trace stack it consults.
#include <vector>

#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::ir {
namespace {
thread_local std::vector<TraceBase*> g_trace_stack;
}  // namespace

ActiveTrace::ActiveTrace(TraceBase& trace) : trace_(&trace) {
  g_trace_stack.push_back(trace_);
  trace_->level_ = static_cast<int>(g_trace_stack.size());
}

ActiveTrace::~ActiveTrace() {
  FLAXPP_ASSERT(!g_trace_stack.empty() && g_trace_stack.back() == trace_,
                "traces ended out of order");
  g_trace_stack.pop_back();
}

TraceBase* current_trace() {
  return g_trace_stack.empty() ? nullptr : g_trace_stack.back();
}

std::vector<Array> bind(const Primitive& prim, std::span<const Array> inputs,
                        const Params& params) {
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].valid())
      throw ValueError(
          detail::str(prim.name(), ": input ", i, " is a null Array (default-constructed)"));
  if (TraceBase* trace = current_trace()) return trace->process(prim, inputs, params);
  for (const Array& x : inputs)
    if (x.is_traced())
      throw TracerError(detail::str(
          prim.name(),
          ": an input is a traced array that escaped from a finished grad, vjp or checkpoint "
          "trace (e.g. stored in a variable outside the transformed function); return it from the "
          "function instead"));
  if (prim.impl()) return prim.impl()(inputs, params);
  return eval_primitive(prim, inputs, params);
}

Array bind1(const Primitive& prim, std::span<const Array> inputs, const Params& params) {
  std::vector<Array> out = bind(prim, inputs, params);
  FLAXPP_ASSERT(out.size() == 1, prim.name(), " has ", out.size(), " outputs");
  return std::move(out[0]);
}

std::vector<Array> Primitive::vjp(const VjpArgs& args) const {
  if (!vjp_rule_)
    throw ValueError(
        detail::str("differentiation of ", name_, " is not supported: it has no VJP rule"));
  bool any = false;
  for (const Array& ct : args.cotangents)
    any = any || ct.valid();
  std::vector<Array> cts = any ? vjp_rule_(args) : std::vector<Array>(args.inputs.size());
  if (cts.size() != args.inputs.size())
    throw ValueError(detail::str("the VJP rule of ", name_, " returned ", cts.size(),
                                 " cotangents for ", args.inputs.size(),
                                 " inputs; it must return one per input (a null Array for none)"));
  for (std::size_t i = 0; i < cts.size(); ++i)
    if (cts[i].valid() && is_floating(args.inputs[i].dtype()) &&
        cts[i].aval() != args.inputs[i].aval())
      throw ValueError(detail::str(
          "the VJP rule of ", name_, " returned a cotangent ", cts[i].aval(), " for input ", i,
          ", which is ", args.inputs[i].aval(), "; a cotangent has its input's shape and dtype"));
  // Only floating inputs carry cotangents.
  for (std::size_t i = 0; i < cts.size(); ++i)
    if (!is_floating(args.inputs[i].dtype())) cts[i] = Array();
  return cts;
}

}  // namespace flaxpp::ir
