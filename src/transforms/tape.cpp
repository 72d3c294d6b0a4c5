// The tape: replaying a traced graph into the current trace (by the reverse rules where
// primitives registered one), and one equation's VJP.
#include "flaxpp/transforms/tape.hpp"

#include <algorithm>
#include <unordered_map>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/primitive_rules.hpp"

namespace flaxpp::transforms {

const ir::Graph& body_of(const ir::Params& params) {
  return *params.get<std::shared_ptr<const ir::Graph>>("jaxpr");
}

Array zeros(const AVal& aval) {
  return lax::broadcast_in_dim(lax::scalar(0.0, aval.dtype), aval.shape, {});
}

std::vector<Array> replay_graph(const ir::Graph& g, std::span<const Array> inputs,
                                const EqnVisitor& visit) {
  std::vector<Array> env(g.num_vars());
  for (std::size_t i = 0; i < g.constvars.size(); ++i)
    env[static_cast<std::size_t>(g.constvars[i])] = g.consts[i];
  for (std::size_t i = 0; i < inputs.size(); ++i)
    env[static_cast<std::size_t>(g.invars[i])] = inputs[i];
  auto value = [&](const ir::Atom& a) {
    return a.is_literal() ? a.literal : env[static_cast<std::size_t>(a.var)];
  };
  for (const ir::Eqn& e : g.eqns) {
    std::vector<Array> ins;
    for (const ir::Atom& a : e.inputs)
      ins.push_back(value(a));
    const std::vector<Array> outs = visit(e, std::move(ins));
    for (std::size_t k = 0; k < outs.size(); ++k)
      env[static_cast<std::size_t>(e.outputs[k])] = outs[k];
  }
  std::vector<Array> results;
  for (const ir::Atom& a : g.outvars)
    results.push_back(value(a));
  return results;
}

namespace {

std::unordered_map<const ir::Primitive*, ReverseRule>& reverse_rules() {
  static std::unordered_map<const ir::Primitive*, ReverseRule> rules;
  return rules;
}

}  // namespace

void register_reverse_rule(const ir::Primitive& prim, ReverseRule rule) {
  reverse_rules()[&prim] = std::move(rule);
}

const ReverseRule* reverse_rule_of(const ir::Primitive& prim) {
  const auto it = reverse_rules().find(&prim);
  return it == reverse_rules().end() ? nullptr : &it->second;
}

std::vector<Array> replay_flat(const ir::Graph& g, std::span<const Array> inputs,
                               std::vector<TapeEqn>& eqns, const SavedFn& saved,
                               TangentSet* tangents) {
  EqnVisitor visit = [&](const ir::Eqn& e, std::vector<Array> ins) -> std::vector<Array> {
    if (const ReverseRule* rule = reverse_rule_of(*e.prim); rule && rule->flatten_in_regions)
      return replay_graph(ir::call_graph(e), ins, visit);
    TapeEqn t{&e, std::move(ins), {}};
    std::optional<std::vector<Array>> s = saved ? saved(eqns.size(), t) : std::nullopt;
    t.outs = s ? std::move(*s) : ir::bind(*e.prim, t.ins, e.params);
    if (tangents) tangents->propagate(e, t.ins, t.outs);
    std::vector<Array> outs = t.outs;
    eqns.push_back(std::move(t));
    return outs;
  };
  return replay_graph(g, inputs, visit);
}

std::unique_ptr<TapeEntry> replay_eqn(const ir::Eqn& e, std::vector<Array> ins,
                                      TangentSet& tangents) {
  std::vector<Array> outs = ir::bind(*e.prim, ins, e.params);
  tangents.propagate(e, ins, outs);
  return std::make_unique<EqnEntry>(TapeEqn{&e, std::move(ins), std::move(outs)});
}

std::vector<Array> replay(const ir::Graph& g, std::span<const Array> inputs, Tape& tape,
                          TangentSet& tangents) {
  return replay_graph(g, inputs, [&](const ir::Eqn& e, std::vector<Array> ins) {
    const ReverseRule* rule = reverse_rule_of(*e.prim);
    tape.push_back(rule ? rule->replay(e, std::move(ins), tangents)
                        : replay_eqn(e, std::move(ins), tangents));
    return tape.back()->outputs();
  });
}

void backward_by(const TapeEqn& t, Cotangents& cts, const CotangentRule& rule) {
  std::vector<Array> out_cts;
  bool any = false;
  for (const Array& y : t.outs) {
    out_cts.push_back(cts.get(y));
    any = any || out_cts.back().valid();
  }
  if (!any) return;
  const std::vector<Array> in_cts = rule(out_cts);
  for (std::size_t k = 0; k < t.ins.size(); ++k)
    cts.add(t.ins[k], in_cts[k]);
}

void backward_eqn(const TapeEqn& t, Cotangents& cts) {
  backward_by(t, cts, [&](std::span<const Array> out_cts) {
    return t.eqn->prim->vjp({t.ins, t.outs, t.eqn->params, out_cts});
  });
}

void EqnEntry::backward(Cotangents& cts) const {
  backward_eqn(eqn, cts);
}

}  // namespace flaxpp::transforms
