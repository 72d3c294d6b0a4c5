// The batching interpreter: a graph traced for one example run on a batch, equation by equation,
// through the primitives' batching rules.
#include "transforms/batching.hpp"

#include <algorithm>

#include "flaxpp/ir/primitive.hpp"
#include "flaxpp/transforms/trace.hpp"

namespace flaxpp::transforms {
namespace {

// A rule's results against the equation's avals for one example: a wrong rule is a bug in
// flaxpp (or in a primitive defined outside it), reported where it happens.
void check_results(const ir::Eqn& e, const ir::Graph& graph, const ir::BatchedResults& r,
                   std::int64_t size) {
  FLAXPP_ASSERT(r.outputs.size() == e.outputs.size() && r.batched.size() == e.outputs.size(),
                "the batching rule of ", e.prim->name(), " returned ", r.outputs.size(),
                " results for ", e.outputs.size());
  for (std::size_t k = 0; k < e.outputs.size(); ++k) {
    const AVal& one = graph.aval(e.outputs[k]);
    const AVal want = r.batched[k] ? with_leading_axis(one, size) : one;
    FLAXPP_ASSERT(r.outputs[k].aval() == want, "the batching rule of ", e.prim->name(),
                  " gave result ", k, " as ", r.outputs[k].aval(), ", expected ", want);
  }
}

}  // namespace

AVal with_leading_axis(const AVal& aval, std::int64_t n) {
  std::vector<std::int64_t> dims{n};
  dims.insert(dims.end(), aval.shape.dims().begin(), aval.shape.dims().end());
  return {Shape(std::move(dims)), aval.dtype};
}

ir::BatchedResults batch_eval(const ir::Graph& graph, std::vector<Array> args,
                              const std::vector<bool>& batched, std::int64_t size) {
  FLAXPP_ASSERT(args.size() == graph.invars.size() && batched.size() == args.size(),
                "batch_eval: ", args.size(), " arguments for ", graph.invars.size(), " inputs");
  const std::size_t n = graph.eqns.size();
  // last_use[v]: the last equation reading v; n for outputs.
  std::vector<std::size_t> last_use(graph.num_vars(), 0);
  for (std::size_t i = 0; i < n; ++i)
    for (const ir::Atom& a : graph.eqns[i].inputs)
      if (!a.is_literal()) last_use[static_cast<std::size_t>(a.var)] = i;
  for (const ir::Atom& a : graph.outvars)
    if (!a.is_literal()) last_use[static_cast<std::size_t>(a.var)] = n;

  std::vector<Array> env(graph.num_vars());
  std::vector<bool> env_batched(graph.num_vars(), false);
  for (std::size_t i = 0; i < graph.constvars.size(); ++i)
    env[static_cast<std::size_t>(graph.constvars[i])] = graph.consts[i];
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto v = static_cast<std::size_t>(graph.invars[i]);
    const AVal one = graph.aval(graph.invars[i]);
    FLAXPP_ASSERT(args[i].aval() == (batched[i] ? with_leading_axis(one, size) : one),
                  "batch_eval: input ", i, " is ", args[i].aval(), " for ", one);
    env[v] = std::move(args[i]);
    env_batched[v] = batched[i];
  }
  for (std::size_t i = 0; i < n; ++i) {
    const ir::Eqn& e = graph.eqns[i];
    std::vector<Array> inputs;
    std::vector<bool> in_batched;
    for (const ir::Atom& a : e.inputs) {
      inputs.push_back(a.is_literal() ? a.literal : env[static_cast<std::size_t>(a.var)]);
      in_batched.push_back(!a.is_literal() && env_batched[static_cast<std::size_t>(a.var)]);
    }
    ir::BatchedResults r;
    if (std::find(in_batched.begin(), in_batched.end(), true) == in_batched.end()) {
      r.outputs = ir::bind(*e.prim, inputs, e.params);
      r.batched.assign(r.outputs.size(), false);
    } else {
      const ir::BatchRule* rule = ir::batching_rule(*e.prim);
      if (rule == nullptr)
        throw ValueError(detail::str(
            "vmap: the primitive ", e.prim->name(),
            " has no batching rule, and the function applies it to values that differ between "
            "examples; apply it outside vmap, or register its rule (ir::register_batching)"));
      r = (*rule)(ir::BatchArgs{*e.prim, inputs, in_batched, e.params, size});
      check_results(e, graph, r, size);
    }
    for (const ir::Atom& a : e.inputs)
      if (!a.is_literal() && last_use[static_cast<std::size_t>(a.var)] == i)
        env[static_cast<std::size_t>(a.var)] = Array();
    for (std::size_t k = 0; k < e.outputs.size(); ++k) {
      const auto v = static_cast<std::size_t>(e.outputs[k]);
      env[v] = std::move(r.outputs[k]);
      env_batched[v] = r.batched[k];
    }
  }
  ir::BatchedResults out;
  for (const ir::Atom& a : graph.outvars) {
    out.outputs.push_back(a.is_literal() ? a.literal : env[static_cast<std::size_t>(a.var)]);
    out.batched.push_back(!a.is_literal() && env_batched[static_cast<std::size_t>(a.var)]);
  }
  return out;
}

BatchedGraph batch_graph(const ir::Graph& graph, const std::vector<bool>& batched,
                         std::int64_t size, const std::vector<bool>& force_batched) {
  std::vector<AVal> avals;
  for (std::size_t i = 0; i < graph.invars.size(); ++i) {
    const AVal& one = graph.aval(graph.invars[i]);
    avals.push_back(batched[i] ? with_leading_axis(one, size) : one);
  }
  BatchedGraph b;
  b.graph = make_graph(
      [&](std::span<const Array> args) {
        ir::BatchedResults r =
            batch_eval(graph, std::vector<Array>(args.begin(), args.end()), batched, size);
        for (std::size_t k = 0; k < force_batched.size(); ++k)
          if (force_batched[k] && !r.batched[k]) {
            r.outputs[k] = ir::with_batch_axis(r.outputs[k], false, size);
            r.batched[k] = true;
          }
        b.out_batched = std::move(r.batched);
        return std::move(r.outputs);
      },
      avals);
  b.consts = close_over_consts(b.graph);
  return b;
}

}  // namespace flaxpp::transforms
