// Reverse-mode AD, as JAX does it: trace the function, replay it into a joint
// forward/backward trace applying each primitive's VJP rule in reverse, then split the joint
// graph by partial evaluation into the forward part (run now; it yields the outputs and the
// residuals) and the backward part (run when the cotangents come).
//
// A checkpoint equation is a region: its body runs inline in the forward part, the region's
// policy decides per body equation whether the output is saved, recomputed or offloaded, and
// the region's backward becomes one checkpoint equation (differentiated=True) whose body
// recomputes what was not saved and applies the VJP rules. Regions nested inside a region
// are flattened into it: the outermost policy decides what crosses from the forward to the
// backward pass (JAX's rule); inner policies do not act inside an outer region.
#include "flaxpp/transforms/autodiff.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "transforms/partial_eval.hpp"

namespace flaxpp {
namespace {

// One primal equation replayed in the current trace, with its input and output values.
struct TapeEqn {
  const ir::Eqn* eqn;
  std::vector<Array> ins, outs;
};

// A checkpointed region replayed inline: its (flattened) equations and its policy.
struct Region {
  PolicyPtr policy;
  ir::Params params;
  std::vector<Array> inputs, outputs;
  std::vector<bool> input_has_tangent;  // which inputs derive from the differentiated primals
  std::vector<TapeEqn> eqns;
};

// A top-level item of the tape: a plain equation or a region.
struct TapeItem {
  TapeEqn eqn;
  std::unique_ptr<Region> region;
};

const ir::Graph& body_of(const ir::Params& params) {
  return *params.get<std::shared_ptr<const ir::Graph>>("jaxpr");
}

// The traced values that carry a tangent: the differentiated primals and everything computed
// from them (except through stop_gradient). Only they need cotangents.
class TangentSet {
 public:
  void add(const Array& x) {
    if (x.is_traced() && is_floating(x.dtype())) set_.insert(x.tracer());
  }
  bool has(const Array& x) const { return x.is_traced() && set_.count(x.tracer()) != 0; }
  // Marks an equation's outputs when one of its inputs carries a tangent.
  void propagate(const ir::Eqn& e, std::span<const Array> ins, std::span<const Array> outs) {
    if (e.prim == &lax::stop_gradient_p) return;
    if (std::any_of(ins.begin(), ins.end(), [&](const Array& x) { return has(x); }))
      for (const Array& y : outs)
        add(y);
  }

 private:
  std::unordered_set<const Tracer*> set_;
};

// Replays `g` on `inputs` in the current trace, handing every equation with its input values
// to `visit`, which returns the output values.
using EqnVisitor = std::function<std::vector<Array>(const ir::Eqn&, std::vector<Array> ins)>;
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

// Replays `g` flattening checkpoint equations into their bodies; every other equation is
// recorded in `eqns` in order. `saved` (if given) supplies the outputs of equation number i
// instead of recomputing it; `tangents` (if given) is propagated.
using SavedFn = std::function<std::optional<std::vector<Array>>(std::size_t index, const TapeEqn&)>;
std::vector<Array> replay_flat(const ir::Graph& g, std::span<const Array> inputs,
                               std::vector<TapeEqn>& eqns, const SavedFn& saved,
                               TangentSet* tangents) {
  EqnVisitor visit = [&](const ir::Eqn& e, std::vector<Array> ins) -> std::vector<Array> {
    if (e.prim == &checkpoint_p) return replay_graph(body_of(e.params), ins, visit);
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

// Replays `g` at the top level: checkpoint equations become regions.
std::vector<Array> replay(const ir::Graph& g, std::span<const Array> inputs,
                          std::vector<TapeItem>& tape, TangentSet& tangents) {
  return replay_graph(
      g, inputs, [&](const ir::Eqn& e, std::vector<Array> ins) -> std::vector<Array> {
        TapeItem item;
        if (e.prim == &checkpoint_p) {
          auto region = std::make_unique<Region>();
          region->policy = e.params.get<PolicyPtr>("policy");
          region->params = e.params;
          for (const Array& x : ins)
            region->input_has_tangent.push_back(tangents.has(x));
          region->outputs = replay_flat(body_of(e.params), ins, region->eqns, {}, &tangents);
          region->inputs = std::move(ins);
          item.region = std::move(region);
          tape.push_back(std::move(item));
          return tape.back().region->outputs;
        }
        std::vector<Array> outs = ir::bind(*e.prim, ins, e.params);
        tangents.propagate(e, ins, outs);
        item.eqn = TapeEqn{&e, std::move(ins), outs};
        tape.push_back(std::move(item));
        return outs;
      });
}

// Cotangents accumulated per traced value.
class Cotangents {
 public:
  void add(const Array& x, const Array& ct) {
    if (!ct.valid() || !x.is_traced() || !is_floating(x.dtype())) return;
    auto [it, inserted] = map_.try_emplace(x.tracer(), ct);
    if (!inserted) it->second = lax::add(it->second, ct);
  }
  Array get(const Array& x) const {
    if (!x.is_traced()) return Array();
    const auto it = map_.find(x.tracer());
    return it == map_.end() ? Array() : it->second;
  }

 private:
  std::unordered_map<const Tracer*, Array> map_;
};

void backward_eqn(const TapeEqn& t, Cotangents& cts) {
  std::vector<Array> out_cts;
  bool any = false;
  for (const Array& y : t.outs) {
    out_cts.push_back(cts.get(y));
    any = any || out_cts.back().valid();
  }
  if (!any) return;
  const std::vector<Array> in_cts = t.eqn->prim->vjp({t.ins, t.outs, t.eqn->params, out_cts});
  for (std::size_t k = 0; k < t.ins.size(); ++k)
    cts.add(t.ins[k], in_cts[k]);
}

ir::Decision decide(const ir::Policy& policy, const TapeEqn& t) {
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

// The backward of a region: one checkpoint equation (differentiated) in the current trace,
// taking the region inputs and saved values it needs (the residuals, once partial evaluation
// splits the joint graph) and the output cotangents.
void backward_region(const Region& r, Cotangents& cts) {
  // An output that is one of the region's inputs, or repeats an earlier output, is the same
  // traced value: its cotangent already sits on that value, so it must not flow through the
  // region again (it would be counted twice).
  std::vector<Array> out_cts;
  std::unordered_set<const Tracer*> seen;
  for (const Array& x : r.inputs)
    if (x.is_traced()) seen.insert(x.tracer());
  for (const Array& y : r.outputs)
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

// The joint function of a traced graph: (primals, output cotangents) -> (outputs, the non-zero
// input cotangents). `nonzero` records which inputs got a cotangent.
std::vector<Array> joint(const ir::Graph& g, std::span<const Array> in,
                         const std::vector<bool>& differentiable, std::vector<bool>& nonzero) {
  const std::size_t n = g.invars.size();
  std::vector<TapeItem> tape;
  TangentSet tangents;
  for (std::size_t i = 0; i < n; ++i)
    if (differentiable[i]) tangents.add(in[i]);
  std::vector<Array> results = replay(g, in.subspan(0, n), tape, tangents);
  Cotangents cts;
  for (std::size_t j = 0; j < results.size(); ++j)
    cts.add(results[j], in[n + j]);
  for (std::size_t i = tape.size(); i-- > 0;) {
    if (tape[i].region) {
      backward_region(*tape[i].region, cts);
    } else {
      backward_eqn(tape[i].eqn, cts);
    }
  }
  nonzero.assign(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const Array ct = differentiable[i] ? cts.get(in[i]) : Array();
    if (!ct.valid()) continue;
    nonzero[i] = true;
    results.push_back(ct);
  }
  return results;
}

}  // namespace

// A function split for reverse mode: the forward graph (primals -> outputs, known
// cotangents, residuals) and the backward graph (residuals, cotangents -> input cotangents).
// Built once for given input avals; immutable afterwards, so calls share it.
struct Linearized {
  transforms::PartialEvalResult pe;
  std::vector<bool> nonzero;         // per primal: has a cotangent
  std::vector<bool> differentiable;  // per primal: as the caller marked it
  std::size_t num_outputs = 0;
  std::vector<AVal> primal_avals, output_avals;
  // Per output of the backward graph: the primal it is the cotangent of.
  std::vector<std::size_t> unknown_input;
  // Where CompiledVjp::on placed the constants (zero cotangents are made there too).
  std::optional<Device> device;
};

namespace {

Linearized linearize(const ArrayFn& f, std::span<const AVal> primal_avals,
                     std::vector<bool> differentiable) {
  if (differentiable.empty()) differentiable.assign(primal_avals.size(), true);
  if (differentiable.size() != primal_avals.size())
    throw ValueError(detail::str("vjp: the differentiable mask has ", differentiable.size(),
                                 " entries for ", primal_avals.size(), " inputs"));
  Linearized lin;
  lin.differentiable = differentiable;
  lin.primal_avals.assign(primal_avals.begin(), primal_avals.end());
  const ir::Graph g = make_graph(f, primal_avals);
  lin.num_outputs = g.outvars.size();
  for (const ir::Atom& a : g.outvars)
    lin.output_avals.push_back(g.aval(a));
  std::vector<AVal> joint_avals = lin.primal_avals;
  joint_avals.insert(joint_avals.end(), lin.output_avals.begin(), lin.output_avals.end());
  ir::Graph j = make_graph(
      [&](std::span<const Array> in) { return joint(g, in, differentiable, lin.nonzero); },
      joint_avals);
  ir::dce(j);
  std::vector<bool> unknown(joint_avals.size(), false);
  std::fill(unknown.begin() + static_cast<std::ptrdiff_t>(primal_avals.size()), unknown.end(),
            true);
  lin.pe = transforms::partial_eval(j, unknown);
  ir::dce(lin.pe.known);
  ir::dce(lin.pe.unknown);
  for (std::size_t k = 0; k < lin.num_outputs; ++k)
    FLAXPP_ASSERT(lin.pe.output_known[k], "a primal output depends on a cotangent");
  std::size_t slot = lin.num_outputs;
  for (std::size_t i = 0; i < lin.primal_avals.size(); ++i) {
    if (!lin.nonzero[i]) continue;
    if (!lin.pe.output_known[slot]) lin.unknown_input.push_back(i);
    ++slot;
  }
  return lin;
}

// What one call's backward pass needs: the shared linearisation and this call's residuals.
struct Backward {
  std::shared_ptr<const Linearized> lin;
  std::vector<Array> residuals, known_cts;
  bool spent = false;

  // Input cotangents, each handed to `sink` (zeros for inputs the outputs do not depend on,
  // and for inputs marked not differentiable unless `skip_marked`): from the backward graph as
  // soon as final, then those the forward part computed.
  void run_into(std::span<const Array> cotangents, bool release, const OutputSink& sink,
                bool skip_marked = false) {
    if (spent)
      throw ValueError(
          "vjp: the backward pass was already run with backward_once, which frees its residuals");
    const auto& out_avals = lin->output_avals;
    if (cotangents.size() != out_avals.size())
      throw ValueError(detail::str("vjp backward: expected ", out_avals.size(), " cotangents, got ",
                                   cotangents.size()));
    for (std::size_t k = 0; k < cotangents.size(); ++k)
      if (cotangents[k].aval() != out_avals[k])
        throw ValueError(detail::str("vjp backward: cotangent ", k, " must be ", out_avals[k],
                                     " like the output, got ", cotangents[k].aval()));
    // Checked first, so that bad cotangents leave the residuals for another try.
    std::vector<Array> args = release ? std::move(residuals) : residuals;
    std::vector<Array> known = release ? std::move(known_cts) : known_cts;
    spent = release;
    args.insert(args.end(), cotangents.begin(), cotangents.end());
    eval_graph(lin->pe.unknown, std::move(args),
               [&](std::size_t k, Array ct) { sink(lin->unknown_input[k], std::move(ct)); });
    std::size_t next_known = 0;
    std::size_t slot = out_avals.size();
    for (std::size_t i = 0; i < lin->primal_avals.size(); ++i) {
      if (!lin->nonzero[i]) {
        if (!(skip_marked && !lin->differentiable[i]))
          sink(i, Array::full(lin->primal_avals[i].shape, 0.0, lin->primal_avals[i].dtype,
                              lin->device ? *lin->device : default_device()));
        continue;
      }
      if (lin->pe.output_known[slot]) sink(i, std::move(known[next_known++]));
      ++slot;
    }
  }

  std::vector<Array> run(std::span<const Array> cotangents, bool release) {
    std::vector<Array> input_cts(lin->primal_avals.size());
    run_into(cotangents, release, [&](std::size_t i, Array ct) { input_cts[i] = std::move(ct); });
    return input_cts;
  }
};

}  // namespace

CompiledVjp::CompiledVjp(const ArrayFn& f, std::span<const AVal> avals,
                         std::vector<bool> differentiable)
    : lin_(std::make_shared<const Linearized>(linearize(f, avals, std::move(differentiable)))) {}

const std::vector<AVal>& CompiledVjp::output_avals() const {
  return lin_->output_avals;
}

CompiledVjp CompiledVjp::on(Device device) const {
  auto lin = std::make_shared<Linearized>(*lin_);
  lin->pe.known = ir::with_constants_on(lin->pe.known, device);
  lin->pe.unknown = ir::with_constants_on(lin->pe.unknown, device);
  lin->device = device;
  return CompiledVjp(std::move(lin));
}

VjpResult CompiledVjp::operator()(std::span<const Array> primals) const {
  if (primals.size() != lin_->primal_avals.size())
    throw ValueError(detail::str("compiled vjp: traced for ", lin_->primal_avals.size(),
                                 " inputs, called with ", primals.size()));
  for (std::size_t i = 0; i < primals.size(); ++i)
    if (primals[i].aval() != lin_->primal_avals[i])
      throw ValueError(detail::str("compiled vjp: input ", i, " was traced as ",
                                   lin_->primal_avals[i], ", got ", primals[i].aval(),
                                   "; trace again for new shapes"));
  // Forward: outputs, cotangents that need no cotangent input (e.g. constants), residuals.
  std::vector<Array> known_out = eval_graph(lin_->pe.known, primals);
  const std::size_t num_known = known_out.size() - lin_->pe.num_residuals;
  auto state = std::make_shared<Backward>();
  state->lin = lin_;
  state->residuals.assign(
      std::make_move_iterator(known_out.begin() + static_cast<std::ptrdiff_t>(num_known)),
      std::make_move_iterator(known_out.end()));
  state->known_cts.assign(known_out.begin() + static_cast<std::ptrdiff_t>(lin_->num_outputs),
                          known_out.begin() + static_cast<std::ptrdiff_t>(num_known));
  VjpResult result;
  result.outputs.assign(known_out.begin(),
                        known_out.begin() + static_cast<std::ptrdiff_t>(lin_->num_outputs));
  for (const Array& r : state->residuals)
    result.residual_bytes += r.nbytes();
  result.backward_graph = std::shared_ptr<const ir::Graph>(lin_, &lin_->pe.unknown);
  result.backward = [state](std::span<const Array> cts) { return state->run(cts, false); };
  result.backward_once = [state](std::span<const Array> cts) { return state->run(cts, true); };
  result.backward_into = [state](std::span<const Array> cts, const OutputSink& sink) {
    state->run_into(cts, true, sink, /*skip_marked=*/true);
  };
  return result;
}

VjpResult vjp(const ArrayFn& f, std::span<const Array> primals) {
  std::vector<AVal> avals;
  for (const Array& p : primals)
    avals.push_back(p.aval());
  return CompiledVjp(f, avals)(primals);
}

std::vector<SavedResidual> saved_residuals(const ArrayFn& f, std::span<const Array> args) {
  std::vector<AVal> avals;
  for (const Array& a : args)
    avals.push_back(a.aval());
  const Linearized lin = linearize(f, avals, {});
  const ir::Graph& known = lin.pe.known;
  std::unordered_map<ir::VarId, const ir::Eqn*> producer;
  for (const ir::Eqn& e : known.eqns)
    for (ir::VarId v : e.outputs)
      producer[v] = &e;
  std::vector<SavedResidual> out;
  // Constants the backward pass reads (e.g. arrays the function captured), as JAX lists them.
  for (const Array& c : lin.pe.unknown.consts) {
    SavedResidual r;
    r.aval = c.aval();
    r.kind = SavedResidual::Kind::constant;
    out.push_back(std::move(r));
  }
  const std::size_t first = known.outvars.size() - lin.pe.num_residuals;
  for (std::size_t k = first; k < known.outvars.size(); ++k) {
    const ir::Atom& a = known.outvars[k];
    SavedResidual r;
    r.aval = known.aval(a);
    if (a.is_literal()) {
      r.kind = SavedResidual::Kind::literal;
    } else if (const auto it = std::find(known.invars.begin(), known.invars.end(), a.var);
               it != known.invars.end()) {
      r.kind = SavedResidual::Kind::argument;
      r.argument = static_cast<int>(it - known.invars.begin());
    } else if (std::find(known.constvars.begin(), known.constvars.end(), a.var) !=
               known.constvars.end()) {
      r.kind = SavedResidual::Kind::constant;
    } else {
      const ir::Eqn* e = producer.at(a.var);
      r.kind = SavedResidual::Kind::output;
      r.primitive = e->prim->name();
      if (e->prim == &lax::name_p) {
        r.kind = SavedResidual::Kind::named;
        r.name = e->params.get<std::string>("name");
      }
      if (e->prim == &device_put_p)
        r.memory_kind = memory_kind_from_name(e->params.get<std::string>("memory_kind"));
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string SavedResidual::str(std::span<const std::string> arg_names) const {
  std::string aval_text = aval.str();
  if (memory_kind == MemoryKind::pinned_host)  // JAX: f32<host>[5,4]
    aval_text = detail::str(dtype_short_name(aval.dtype), "<host>", aval.shape);
  switch (kind) {
    case Kind::literal:
      return aval_text + " from a literal";
    case Kind::constant:
      return aval_text + " from a constant";
    case Kind::argument:
      return static_cast<std::size_t>(argument) < arg_names.size()
                 ? detail::str(aval_text, " from the argument ",
                               arg_names[static_cast<std::size_t>(argument)])
                 : detail::str(aval_text, " from the argument at flattened index ", argument);
    case Kind::named:
      return detail::str(aval_text, " named '", name, "'");
    case Kind::output:
      return detail::str(aval_text, " output of ", primitive);
  }
  return aval_text;
}

void print_saved_residuals(const ArrayFn& f, std::span<const Array> args,
                           std::span<const std::string> arg_names, std::ostream& os) {
  for (const SavedResidual& r : saved_residuals(f, args))
    os << r.str(arg_names) << "\n";
}

ValueAndGrad value_and_grad(const TreeLossFn& f, std::span<const Tree> args,
                            std::span<const int> argnums) {
  std::vector<std::vector<Array>> leaves;
  for (const Tree& t : args)
    leaves.push_back(t.leaves());
  std::vector<Array> primals;
  for (int a : argnums) {
    if (a < 0 || static_cast<std::size_t>(a) >= args.size())
      throw ValueError(detail::str("value_and_grad: argnum ", a, " is out of range for ",
                                   args.size(), " arguments"));
    for (const Array& leaf : leaves[static_cast<std::size_t>(a)]) {
      if (!is_floating(leaf.dtype()))
        throw ValueError(
            detail::str("value_and_grad: argument ", a, " has a ", dtype_name(leaf.dtype()),
                        " leaf; only floating inputs can be differentiated (pass it in an argument "
                        "not listed in argnums)"));
      primals.push_back(leaf);
    }
  }
  auto flat = [&](std::span<const Array> xs) {
    std::vector<Tree> trees(args.begin(), args.end());
    std::size_t next = 0;
    for (int a : argnums) {
      const std::size_t count = leaves[static_cast<std::size_t>(a)].size();
      trees[static_cast<std::size_t>(a)] =
          args[static_cast<std::size_t>(a)].with_leaves(xs.subspan(next, count));
      next += count;
    }
    Array loss = f(trees);
    if (!loss.valid() || loss.rank() != 0 || !is_floating(loss.dtype()))
      throw ValueError(detail::str(
          "value_and_grad: the function must return a scalar (0-d) floating array, got ",
          loss.valid() ? loss.aval().str() : std::string("a null Array"),
          "; reduce it, e.g. with sum() or mean()"));
    return std::vector<Array>{loss};
  };
  VjpResult r = vjp(flat, primals);
  const Array one = Array::full(Shape{}, 1.0, r.outputs[0].dtype());
  const std::vector<Array> cts = r.backward_once(std::span<const Array>(&one, 1));
  ValueAndGrad out{r.outputs[0], {}};
  std::size_t next = 0;
  for (int a : argnums) {
    const std::size_t count = leaves[static_cast<std::size_t>(a)].size();
    out.grads.push_back(args[static_cast<std::size_t>(a)].with_leaves(
        std::span<const Array>(cts).subspan(next, count)));
    next += count;
  }
  return out;
}

}  // namespace flaxpp
