// GraphTrace: recording primitives into a Graph; lifting constants and outer tracers.
#include "transforms/graph_trace.hpp"

namespace flaxpp::transforms {

class GraphTrace::Tracer final : public ir::TracerBase {
 public:
  Tracer(GraphTrace* trace, ir::VarId var, int level, std::shared_ptr<bool> alive)
      : trace_(trace), var_(var), level_(level), alive_(std::move(alive)) {}
  int level() const override { return level_; }
  ir::TraceBase& trace() const override { return *trace_; }
  bool alive() const { return *alive_; }
  GraphTrace* owner() const { return trace_; }
  ir::VarId var() const { return var_; }

 private:
  GraphTrace* trace_;
  ir::VarId var_;
  int level_;
  std::shared_ptr<bool> alive_;
};

GraphTrace::GraphTrace() : alive_(std::make_shared<bool>(true)) {}

GraphTrace::~GraphTrace() {
  *alive_ = false;
}

Array GraphTrace::make_tracer(ir::VarId var) {
  return Array::traced(std::make_shared<Tracer>(this, var, level(), alive_), graph_.aval(var));
}

Array GraphTrace::new_input(const AVal& aval) {
  const ir::VarId v = graph_.new_var(aval);
  graph_.invars.push_back(v);
  return make_tracer(v);
}

ir::Atom GraphTrace::atom_for(const Array& x) {
  const void* identity = nullptr;
  if (x.is_traced()) {
    const auto* t = dynamic_cast<const Tracer*>(x.tracer());
    if (t != nullptr && !t->alive())
      throw TracerError(detail::str(
          "a traced array (", x.aval(),
          ") escaped from a finished grad, vjp or checkpoint trace and was used "
          "again; return values from the transformed function instead of storing them outside it"));
    if (t != nullptr && t->owner() == this) return ir::Atom::of(t->var());
    identity = x.tracer();  // a tracer of an enclosing trace: a constant here
  } else {
    if (x.rank() == 0) return ir::Atom::lit(x);
    identity = &x.buffer();
  }
  const auto key = std::make_tuple(identity, x.shape().dims(), x.dtype());
  if (const auto it = lifted_.find(key); it != lifted_.end()) return ir::Atom::of(it->second);
  const ir::VarId v = graph_.new_var(x.aval());
  graph_.constvars.push_back(v);
  graph_.consts.push_back(x);
  lifted_.emplace(key, v);
  return ir::Atom::of(v);
}

std::vector<Array> GraphTrace::process(const ir::Primitive& prim, std::span<const Array> inputs,
                                       const ir::Params& params) {
  ir::Eqn eqn{&prim, {}, {}, params};
  std::vector<AVal> in_avals;
  for (const Array& x : inputs) {
    eqn.inputs.push_back(atom_for(x));
    in_avals.push_back(x.aval());
  }
  const std::vector<AVal> out_avals = prim.shape_rule(in_avals, params);
  std::vector<Array> outs;
  for (const AVal& a : out_avals) {
    const ir::VarId v = graph_.new_var(a);
    eqn.outputs.push_back(v);
    outs.push_back(make_tracer(v));
  }
  graph_.eqns.push_back(std::move(eqn));
  return outs;
}

ir::Graph GraphTrace::finish(std::span<const Array> outputs) {
  for (const Array& y : outputs) {
    if (!y.valid()) throw ValueError("a traced function returned a null Array");
    graph_.outvars.push_back(atom_for(y));
  }
  *alive_ = false;
  return std::move(graph_);
}

}  // namespace flaxpp::transforms
