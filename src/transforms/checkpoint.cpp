// checkpoint(): traces the region into a checkpoint equation; the checkpoint and device_put
// primitives. Differentiation of checkpoint equations is in autodiff.cpp.
#include "flaxpp/transforms/checkpoint.hpp"

#include "flaxpp/ir/graph.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "transforms/batching.hpp"
#include "transforms/checkpoint_ad.hpp"

namespace flaxpp {
namespace {
const ir::Graph& body(const ir::Params& params) {
  return *params.get<std::shared_ptr<const ir::Graph>>("jaxpr");
}
}  // namespace

const ir::Primitive checkpoint_p(
    "checkpoint",
    [](std::span<const AVal> in, const ir::Params& params) {
      const ir::Graph& g = body(params);
      FLAXPP_ASSERT(in.size() == g.invars.size(), "checkpoint: ", in.size(), " operands for ",
                    g.invars.size(), " inputs");
      for (std::size_t i = 0; i < in.size(); ++i)
        FLAXPP_ASSERT(in[i] == g.aval(g.invars[i]), "checkpoint operand ", i, " is ", in[i],
                      ", body expects ", g.aval(g.invars[i]));
      std::vector<AVal> out;
      for (const ir::Atom& a : g.outvars)
        out.push_back(g.aval(a));
      return out;
    },
    {},  // differentiated by its reverse rule (checkpoint_ad.cpp), which sees the region's equations
    [](std::span<const Array> inputs, const ir::Params& params) {
      return eval_graph(body(params), inputs);
    });

namespace {
// A call (jit inlines the region once it is differentiated, the executor runs it inline),
// differentiated by its own reverse rule (checkpoint_ad.cpp), and flattened into a region
// that holds it.
// Batched, the region is its body batched (what it saves is decided as before, by its policy).
ir::BatchedResults checkpoint_batched(const ir::BatchArgs& a) {
  transforms::BatchedGraph b = transforms::batch_graph(body(a.params), a.batched, a.size);
  std::vector<Array> operands = std::move(b.consts);
  operands.insert(operands.end(), a.inputs.begin(), a.inputs.end());
  ir::Params params = a.params;
  params.set("jaxpr", std::make_shared<const ir::Graph>(std::move(b.graph)));
  return {ir::bind(checkpoint_p, operands, params), std::move(b.out_batched)};
}

const bool checkpoint_rules_registered = [] {
  ir::register_call(checkpoint_p, "jaxpr");
  ir::register_batching(checkpoint_p, checkpoint_batched);
  transforms::register_reverse_rule(
      checkpoint_p, {.replay = transforms::replay_region, .flatten_in_regions = true});
  return true;
}();
}  // namespace

const ir::Primitive device_put_p(
    "device_put",
    [](std::span<const AVal> in, const ir::Params&) {
      FLAXPP_ASSERT(in.size() == 1, "device_put takes one operand");
      return std::vector<AVal>{in[0]};
    },
    // The copy is linear; its cotangent comes back unchanged.
    [](const ir::VjpArgs& a) { return std::vector<Array>{a.cotangents[0]}; },
    [](std::span<const Array> inputs, const ir::Params& params) {
      const Array& x = inputs[0];
      const MemoryKind kind = memory_kind_from_name(params.get<std::string>("memory_kind"));
      Backend& be = x.buffer().backend();
      std::shared_ptr<Buffer> out = be.allocate(x.nbytes(), kind);
      // Asynchronous where the backend can (CUDA: a side stream), so offloading overlaps with
      // the forward pass; later uses of either buffer are ordered after the copy.
      be.copy_async(x.buffer(), *out, x.nbytes());
      return std::vector<Array>{Array(std::move(out), x.shape(), x.dtype())};
    });

namespace {
// A copy moves the batch as it moves one example.
const bool device_put_batching_registered =
    (ir::register_batching(
         device_put_p,
         [](const ir::BatchArgs& a) {
           return ir::BatchedResults{ir::bind(device_put_p, a.inputs, a.params), {true}};
         }),
     true);
}  // namespace

ArrayFn checkpoint(ArrayFn f, PolicyPtr policy, std::vector<int> static_argnums, bool prevent_cse) {
  if (checkpoint_policies::is_none(policy)) return f;
  if (!policy) policy = checkpoint_policies::nothing_saveable();
  return [f = std::move(f), policy = std::move(policy), static_argnums = std::move(static_argnums),
          prevent_cse](std::span<const Array> args) {
    std::vector<bool> is_static(args.size(), false);
    for (int a : static_argnums) {
      if (a < 0 || static_cast<std::size_t>(a) >= args.size())
        throw ValueError(detail::str("checkpoint: static_argnums contains ", a,
                                     ", but the function was called with ", args.size(),
                                     " arguments (valid positions: 0..", args.size() - 1, ")"));
      if (args[static_cast<std::size_t>(a)].is_traced())
        throw ValueError(detail::str("checkpoint: argument ", a,
                                     " is listed in static_argnums but is a traced value; "
                                     "static arguments must be concrete arrays"));
      is_static[static_cast<std::size_t>(a)] = true;
    }
    std::vector<Array> traced_args;
    std::vector<AVal> avals;
    for (std::size_t i = 0; i < args.size(); ++i)
      if (!is_static[i]) {
        traced_args.push_back(args[i]);
        avals.push_back(args[i].aval());
      }
    ir::Graph g = make_graph(
        [&](std::span<const Array> traced) {
          std::vector<Array> full(args.begin(), args.end());
          std::size_t next = 0;
          for (std::size_t i = 0; i < full.size(); ++i)
            if (!is_static[i]) full[i] = traced[next++];
          return f(full);
        },
        avals);
    // Closed-over values become explicit operands, as in JAX: captured parameters then get
    // gradients, and the policy treats them like arguments.
    std::vector<Array> operands = close_over_consts(g);
    operands.insert(operands.end(), traced_args.begin(), traced_args.end());
    const ir::Params params{{"jaxpr", std::make_shared<const ir::Graph>(std::move(g))},
                            {"policy", policy},
                            {"prevent_cse", prevent_cse},
                            {"differentiated", false}};
    return ir::bind(checkpoint_p, operands, params);
  };
}

Array checkpoint_name(const Array& x, const std::string& name) {
  return lax::checkpoint_name(x, name);
}

}  // namespace flaxpp
