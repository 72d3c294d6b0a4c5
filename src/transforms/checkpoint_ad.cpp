// checkpoint_p's differentiation rule (JAX's remat_p partial-evaluation rule): a region's
// policy decides, per primal equation of its body, whether the backward pass reads the value
// saved, offloaded to another memory kind and brought back, or recomputes it; the region's
// backward becomes one checkpoint equation (differentiated=True) whose body recomputes what
// was not saved and applies the VJP rules. Regions nested inside a region are flattened into
// it: the outermost policy decides what crosses from the forward to the backward pass.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "flaxpp/ir/cost_model.hpp"
#include "flaxpp/ir/flops.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/trace.hpp"
#include "transforms/checkpoint_ad.hpp"
#include "transforms/region_policies.hpp"
#include "transforms/verify_passes.hpp"

namespace flaxpp::transforms {
namespace {

// A checkpointed region replayed inline: its (flattened) equations and its policy.
struct Region final : TapeEntry {
  PolicyPtr policy;
  const ir::Graph* declared_body = nullptr;  // the region's body as traced, before the split
  ir::Params params;
  std::vector<Array> inputs, results;
  std::vector<bool> input_has_tangent;  // which inputs derive from the differentiated primals
  std::vector<TapeEqn> eqns;
  const std::vector<Array>& outputs() const override { return results; }
  void backward(Cotangents& cts) const override;
};

// Whether the equation's reverse rule saves it whatever the policy.
bool saved_by_rule(const TapeEqn& t) {
  const ReverseRule* rule = reverse_rule_of(*t.eqn->prim);
  return rule && rule->saved_in_region && rule->saved_in_region(*t.eqn);
}

ir::Decision decide(const ir::Policy& policy, const TapeEqn& t) {
  if (saved_by_rule(t)) return ir::Decision::save();
  std::vector<AVal> avals;
  for (const Array& x : t.ins)
    avals.push_back(x.aval());
  const ir::Decision d = policy.decide(*t.eqn->prim, avals, t.eqn->params);
  using K = ir::Decision::Kind;
  const bool valid_kind = d.kind == K::save || d.kind == K::recompute || d.kind == K::offload;
  if (!valid_kind || (d.kind == K::offload && d.src == d.dst))
    throw ValueError(detail::str("checkpoint policy ", policy.str(),
                                 " returned an invalid decision for ", t.eqn->prim->name(),
                                 "; a policy must answer save, recompute, or offload between two "
                                 "different memory kinds (device -> pinned_host)"));
  return d;
}

// `body` with the equations whose reverse rule splits them for a policy split for `policy`,
// also inside the calls the region flattens; nullptr where there is nothing to split.
std::shared_ptr<const ir::Graph> split_for_policy(const ir::Graph& body, const PolicyPtr& policy) {
  ir::Graph out = body;
  out.eqns.clear();
  bool changed = false;
  for (const ir::Eqn& e : body.eqns) {
    const ReverseRule* rule = reverse_rule_of(*e.prim);
    if (rule && rule->split_in_region) {
      rule->split_in_region(e, policy, out);
      changed = true;
      continue;
    }
    out.eqns.push_back(e);
    if (!rule || !rule->flatten_in_regions) continue;
    const std::string& param = *ir::call_body(*e.prim);
    if (auto sub = split_for_policy(ir::call_graph(e), policy)) {
      out.eqns.back().params.set(param, std::move(sub));
      changed = true;
    }
  }
  return changed ? std::make_shared<const ir::Graph>(std::move(out)) : nullptr;
}

}  // namespace

std::unique_ptr<TapeEntry> replay_region(const ir::Eqn& e, std::vector<Array> ins,
                                         TangentSet& tangents) {
  auto region = std::make_unique<Region>();
  region->policy = RegionPolicies::policy_of(e);
  region->declared_body = &body_of(e.params);
  region->params = e.params;
  if (auto split = split_for_policy(body_of(e.params), region->policy))
    region->params.set("jaxpr", std::move(split));
  for (const Array& x : ins)
    region->input_has_tangent.push_back(tangents.has(x));
  region->results = replay_flat(body_of(region->params), ins, region->eqns, {}, &tangents);
  region->inputs = std::move(ins);
  return region;
}

// The region inputs and saved values it needs (the residuals, once partial evaluation splits
// the joint graph) and the output cotangents go in.
namespace {

// Tells the budget search (RegionPolicies) which saved values the backward body reads: the
// outputs of equation i sit in operand slots first_saved[i]..., read where `read(slot)`. Each
// with what recomputing it alone would cost: its equation and those it depends on inside the
// region. And the region's values (remat_values.hpp), timed by the scope's cost model.
template <class Read>
void note_kept(const Region& r, const std::vector<ir::Decision>& decisions,
               const std::vector<std::size_t>& first_saved, const Read& read) {
  RegionPolicies* scope = RegionPolicies::active();
  if (scope == nullptr) return;
  const std::size_t n = r.eqns.size();
  std::unordered_map<const Tracer*, std::pair<std::size_t, std::size_t>> producer;
  std::vector<std::int64_t> own_flops(n);
  RegionValues values;
  for (std::size_t i = 0; i < n; ++i) {
    const TapeEqn& t = r.eqns[i];
    RegionValues::Node node{.primitive = t.eqn->prim->name(), .always_saved = saved_by_rule(t)};
    std::vector<AVal> ins, outs;
    for (const Array& x : t.ins) {
      ins.push_back(x.aval());
      node.input_shapes.push_back(x.shape());
      const auto it = x.is_traced() ? producer.find(x.tracer()) : producer.end();
      node.operands.emplace_back(
          it == producer.end() ? -1 : static_cast<std::ptrdiff_t>(it->second.first),
          it == producer.end() ? 0 : it->second.second);
    }
    for (std::size_t j = 0; j < t.outs.size(); ++j) {
      const Array& y = t.outs[j];
      outs.push_back(y.aval());
      node.output_bytes.push_back(y.aval().nbytes());
      node.read.push_back(decisions[i].kind != ir::Decision::Kind::recompute &&
                          read(first_saved[i] + j));
      if (y.is_traced()) producer.emplace(y.tracer(), std::pair{i, j});
    }
    own_flops[i] = ir::eqn_flops(*t.eqn, ins, outs);
    node.seconds = ir::eqn_seconds(*t.eqn, ins, outs, scope->cost_model());
    values.nodes.push_back(std::move(node));
  }
  const auto recompute_flops = [&](std::size_t i) {
    std::vector<bool> in_cone(n, false);
    std::vector<std::size_t> stack{i};
    std::int64_t total = 0;
    while (!stack.empty()) {
      const std::size_t j = stack.back();
      stack.pop_back();
      if (in_cone[j]) continue;
      in_cone[j] = true;
      total += own_flops[j];
      for (const auto& [p, output] : values.nodes[j].operands)
        if (p >= 0) stack.push_back(static_cast<std::size_t>(p));
    }
    return total;
  };
  std::vector<RematPlan::Kept> kept;
  for (std::size_t i = 0; i < n; ++i) {
    const std::vector<Array>& outs = r.eqns[i].outs;
    for (std::size_t j = 0; j < outs.size(); ++j)
      if (values.nodes[i].read[j])
        kept.push_back({r.eqns[i].eqn->prim->name(), outs[j].aval().str(), outs[j].aval().nbytes(),
                        recompute_flops(i),
                        r.eqns[i].eqn->prim == &lax::name_p
                            ? r.eqns[i].eqn->params.get<std::string>("name")
                            : std::string()});
  }
  scope->note_kept(r.declared_body, std::move(kept), std::move(values));
}

void backward_region(const Region& r, Cotangents& cts) {
  // An output that is one of the region's inputs, or repeats an earlier output, is the same
  // traced value: its cotangent already sits on that value, so it must not flow through the
  // region again (it would be counted twice).
  std::vector<Array> out_cts;
  std::unordered_set<const Tracer*> seen;
  for (const Array& x : r.inputs)
    if (x.is_traced()) seen.insert(x.tracer());
  for (const Array& y : r.results)
    out_cts.push_back(y.is_traced() && seen.insert(y.tracer()).second ? cts.get(y) : Array());
  if (std::none_of(out_cts.begin(), out_cts.end(), [](const Array& c) { return c.valid(); }))
    return;

  // The policy's answer for every primal equation of the region.
  std::vector<ir::Decision> decisions;
  for (const TapeEqn& t : r.eqns)
    decisions.push_back(decide(*r.policy, t));

  // Operands of the backward body: region inputs, then the outputs of every saved or
  // offloaded equation, then the non-zero output cotangents. Dead-code elimination of the
  // body then leaves only what the backward pass really reads.
  std::vector<Array> operands = r.inputs;
  std::vector<std::size_t> first_saved(r.eqns.size(), 0);
  for (std::size_t i = 0; i < r.eqns.size(); ++i) {
    if (decisions[i].kind == ir::Decision::Kind::recompute) continue;
    first_saved[i] = operands.size();
    operands.insert(operands.end(), r.eqns[i].outs.begin(), r.eqns[i].outs.end());
  }
  const std::size_t first_ct = operands.size();
  std::vector<std::size_t> ct_outputs;
  for (std::size_t j = 0; j < out_cts.size(); ++j)
    if (out_cts[j].valid()) {
      ct_outputs.push_back(j);
      operands.push_back(out_cts[j]);
    }
  std::vector<AVal> avals;
  for (const Array& x : operands)
    avals.push_back(x.aval());

  const ir::Graph& body = body_of(r.params);
  std::vector<bool> nonzero(r.inputs.size(), false);
  ir::Graph bwd = make_graph(
      [&](std::span<const Array> in) {
        const std::size_t n_in = r.inputs.size();
        std::vector<TapeEqn> eqns;
        // Saved equations take their outputs from the operands (offloaded ones are brought
        // back to the device first); the others are recomputed.
        const SavedFn saved = [&](std::size_t i,
                                  const TapeEqn& t) -> std::optional<std::vector<Array>> {
          if (decisions[i].kind == ir::Decision::Kind::recompute) return std::nullopt;
          std::vector<Array> outs;
          for (std::size_t k = 0; k < t.eqn->outputs.size(); ++k) {
            Array v = in[first_saved[i] + k];
            if (decisions[i].kind == ir::Decision::Kind::offload) {
              const Array one[] = {v};
              v = ir::bind1(device_put_p, one,
                            {{"memory_kind", std::string(memory_kind_name(decisions[i].src))}});
            }
            outs.push_back(std::move(v));
          }
          return outs;
        };
        const std::vector<Array> outs =
            replay_flat(body, in.subspan(0, n_in), eqns, saved, nullptr);
        Cotangents bwd_cts;
        for (std::size_t k = 0; k < ct_outputs.size(); ++k)
          bwd_cts.add(outs[ct_outputs[k]], in[first_ct + k]);
        for (std::size_t i = eqns.size(); i-- > 0;)
          backward_eqn(eqns[i], bwd_cts);
        std::vector<Array> results;
        for (std::size_t i = 0; i < n_in; ++i) {
          // Only inputs derived from the differentiated primals need a cotangent.
          if (!r.input_has_tangent[i]) continue;
          const Array ct = bwd_cts.get(in[i]);
          if (!ct.valid()) continue;
          nonzero[i] = true;
          results.push_back(ct);
        }
        return results;
      },
      avals);
  ir::dce(bwd);
  verify_if_asked(bwd);

  // Keep only the operands the backward body reads.
  std::vector<bool> used(bwd.num_vars(), false);
  for (const ir::Eqn& e : bwd.eqns)
    for (const ir::Atom& a : e.inputs)
      if (!a.is_literal()) used[static_cast<std::size_t>(a.var)] = true;
  for (const ir::Atom& a : bwd.outvars)
    if (!a.is_literal()) used[static_cast<std::size_t>(a.var)] = true;
  std::vector<ir::VarId> invars;
  std::vector<Array> args;
  // Which equation (if any) each operand slot was saved from, to offload it on the way out.
  std::vector<std::ptrdiff_t> slot_eqn(operands.size(), -1);
  for (std::size_t i = 0; i < r.eqns.size(); ++i)
    if (decisions[i].kind != ir::Decision::Kind::recompute)
      for (std::size_t k = 0; k < r.eqns[i].outs.size(); ++k)
        slot_eqn[first_saved[i] + k] = static_cast<std::ptrdiff_t>(i);
  note_kept(r, decisions, first_saved,
            [&](std::size_t k) { return used[static_cast<std::size_t>(bwd.invars[k])]; });
  for (std::size_t k = 0; k < operands.size(); ++k) {
    if (!used[static_cast<std::size_t>(bwd.invars[k])]) continue;
    invars.push_back(bwd.invars[k]);
    Array v = operands[k];
    if (slot_eqn[k] >= 0 &&
        decisions[static_cast<std::size_t>(slot_eqn[k])].kind == ir::Decision::Kind::offload) {
      const Array one[] = {v};
      v = ir::bind1(
          device_put_p, one,
          {{"memory_kind",
            std::string(memory_kind_name(decisions[static_cast<std::size_t>(slot_eqn[k])].dst))}});
    }
    args.push_back(std::move(v));
  }
  bwd.invars = std::move(invars);

  ir::Params params = r.params;
  params.set("jaxpr", std::make_shared<const ir::Graph>(std::move(bwd)));
  params.set("differentiated", true);
  const std::vector<Array> in_cts = ir::bind(checkpoint_p, args, params);
  std::size_t next = 0;
  for (std::size_t i = 0; i < r.inputs.size(); ++i)
    if (nonzero[i]) cts.add(r.inputs[i], in_cts[next++]);
}

}  // namespace

void Region::backward(Cotangents& cts) const {
  backward_region(*this, cts);
}

}  // namespace flaxpp::transforms
