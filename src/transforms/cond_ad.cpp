// cond_p's differentiation (JAX's _cond_partial_eval, _cond_partial_eval_custom and
// _cond_transpose): each branch is linearised once, under the policy of the region that holds
// the cond if any, which names the residuals its backward part reads. Residuals that are
// operands of the cond are read from them; the others are computed by a residual cond and
// merged across branches by type (each branch fills the slots of the others with zeros). The
// cond then computes its results from the operands and those residuals, and its VJP rule is
// the cond of the branches' backward parts.
#include <algorithm>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/cond.hpp"
#include "transforms/cond_ad.hpp"
#include "transforms/linearize.hpp"

namespace flaxpp::transforms {

std::string cond_branch_param(std::int64_t k) {
  return "branch" + std::to_string(k);
}

const ir::Graph& cond_branch(const ir::Params& params, std::int64_t k) {
  return *params.get<std::shared_ptr<const ir::Graph>>(cond_branch_param(k));
}

namespace {

std::string vjp_branch_param(std::int64_t k) {
  return "vjp_branch" + std::to_string(k);
}

// One branch linearised: per residual of its backward part, the operand it is, if any; the
// values of its forward part kept in merged residual slots (indices into its outputs).
struct BranchLinear {
  Linearized lin;
  std::vector<std::ptrdiff_t> operand;  // per residual: the operand, or -1
  std::vector<std::size_t> kept;        // the forward part's outputs that go into slots
  std::vector<std::ptrdiff_t> slot_of;  // per output of the forward part: its slot, or -1
};

// A cond split for reverse mode: per branch, its residuals from the operands, its results
// from the residuals and the operands, and its backward part.
struct Split {
  std::vector<AVal> slots;  // the merged residuals' types
  std::vector<std::shared_ptr<const ir::Graph>> res, out, vjp;
  std::vector<std::int64_t> diff;  // the operands that get a cotangent
};

// Whether `policy` saves result `a` of the forward part `known`: computed there by an equation
// the policy saves (JAX's partial_eval_jaxpr_custom keeps such a result rather than
// recomputing it for what reads it after the cond).
bool saved_by(const ir::Policy& policy, const ir::Graph& known, const ir::Atom& a) {
  if (a.is_literal()) return false;
  for (const ir::Eqn& e : known.eqns) {
    if (std::find(e.outputs.begin(), e.outputs.end(), a.var) == e.outputs.end()) continue;
    std::vector<AVal> avals;
    for (const ir::Atom& x : e.inputs)
      avals.push_back(known.aval(x));
    return policy.decide(*e.prim, avals, e.params).kind != ir::Decision::Kind::recompute;
  }
  return false;
}

BranchLinear linearize_branch(const ir::Graph& branch, std::span<const AVal> avals,
                              const PolicyPtr& policy) {
  ArrayFn fn = [&branch](std::span<const Array> in) { return eval_graph(branch, in); };
  if (policy) fn = checkpoint(fn, policy);
  std::vector<bool> differentiable;
  for (const AVal& a : avals)
    differentiable.push_back(is_floating(a.dtype));
  BranchLinear b{linearize(fn, avals, differentiable), {}, {}, {}};
  const ir::Graph& known = b.lin.pe.known;
  const std::size_t num_out = b.lin.num_outputs;
  FLAXPP_ASSERT(known.outvars.size() == num_out + b.lin.pe.num_residuals,
                "cond: a cotangent of a branch does not depend on the output cotangents; "
                "differentiating such a cond is not supported");
  auto operand_of = [&](const ir::Atom& r) -> std::ptrdiff_t {
    const auto in = std::find(known.invars.begin(), known.invars.end(), r.var);
    return r.is_literal() || in == known.invars.end() ? -1 : in - known.invars.begin();
  };
  std::vector<ir::VarId> kept_vars;
  for (std::size_t j = 0; j < b.lin.pe.num_residuals; ++j) {
    const ir::Atom& r = known.outvars[num_out + j];
    b.operand.push_back(operand_of(r));
    if (b.operand.back() >= 0) continue;
    b.kept.push_back(num_out + j);
    kept_vars.push_back(r.var);
  }
  for (std::size_t j = 0; policy && j < num_out; ++j) {
    const ir::Atom& y = known.outvars[j];
    if (operand_of(y) < 0 && saved_by(*policy, known, y) &&
        std::find(kept_vars.begin(), kept_vars.end(), y.var) == kept_vars.end()) {
      b.kept.push_back(j);
      kept_vars.push_back(y.var);
    }
  }
  return b;
}

// JAX's _merge_branch_residuals: the k-th kept value of one type in a branch shares the slot
// of the k-th of that type in the others; slots in order of first appearance.
std::vector<AVal> merge_residuals(std::vector<BranchLinear>& branches) {
  std::vector<std::pair<AVal, std::size_t>> tagged;
  for (BranchLinear& b : branches) {
    const ir::Graph& known = b.lin.pe.known;
    std::vector<AVal> seen;
    b.slot_of.assign(known.outvars.size(), -1);
    for (std::size_t i : b.kept) {
      const AVal a = known.aval(known.outvars[i]);
      const auto n = static_cast<std::size_t>(std::count(seen.begin(), seen.end(), a));
      seen.push_back(a);
      auto it = std::find(tagged.begin(), tagged.end(), std::make_pair(a, n));
      if (it == tagged.end()) it = tagged.insert(tagged.end(), {a, n});
      b.slot_of[i] = it - tagged.begin();
    }
  }
  std::vector<AVal> slots;
  for (const auto& t : tagged)
    slots.push_back(t.first);
  return slots;
}

// (operands) -> every slot: the branch's kept values in theirs, zeros in the others.
ir::Graph residual_graph(const BranchLinear& b, std::span<const AVal> avals,
                         std::span<const AVal> slots) {
  ir::Graph g = make_graph(
      [&](std::span<const Array> ops) {
        const std::vector<Array> r = eval_graph(b.lin.pe.known, ops);
        std::vector<Array> out(slots.size());
        for (std::size_t i : b.kept)
          out[static_cast<std::size_t>(b.slot_of[i])] = r[i];
        for (std::size_t m = 0; m < slots.size(); ++m)
          if (!out[m].valid()) out[m] = zeros(slots[m]);
        return out;
      },
      avals);
  ir::dce(g);
  return g;
}

// (slots, operands) -> the branch's results: its forward part reading the values it kept from
// the slots, which the residual cond filled.
ir::Graph result_graph(const BranchLinear& b, std::span<const AVal> slots) {
  ir::Graph g = b.lin.pe.known;
  std::vector<ir::VarId> slot_vars(slots.size(), -1);
  for (std::size_t i : b.kept) {
    const ir::VarId v = g.outvars[i].var;
    // Its definition now writes a variable nobody reads, so that v is the slot's input.
    for (ir::Eqn& e : g.eqns)
      for (ir::VarId& o : e.outputs)
        if (o == v) o = g.new_var(g.aval(v));
    slot_vars[static_cast<std::size_t>(b.slot_of[i])] = v;
  }
  for (std::size_t m = 0; m < slots.size(); ++m)
    if (slot_vars[m] < 0) slot_vars[m] = g.new_var(slots[m]);
  g.invars.insert(g.invars.begin(), slot_vars.begin(), slot_vars.end());
  g.outvars.resize(b.lin.num_outputs);
  ir::dce(g);
  return g;
}

// (slots, operands, result cotangents) -> the cotangents of the operands in `diff`.
ir::Graph backward_graph(const BranchLinear& b, std::span<const AVal> avals,
                         std::span<const AVal> slots, std::span<const std::int64_t> diff) {
  std::vector<AVal> in(slots.begin(), slots.end());
  in.insert(in.end(), avals.begin(), avals.end());
  in.insert(in.end(), b.lin.output_avals.begin(), b.lin.output_avals.end());
  const std::size_t m = slots.size(), n = avals.size();
  ir::Graph g = make_graph(
      [&](std::span<const Array> x) {
        std::vector<Array> args;
        for (std::size_t j = 0; j < b.operand.size(); ++j)
          args.push_back(b.operand[j] >= 0
                             ? x[m + static_cast<std::size_t>(b.operand[j])]
                             : x[static_cast<std::size_t>(b.slot_of[b.lin.num_outputs + j])]);
        args.insert(args.end(), x.begin() + static_cast<std::ptrdiff_t>(m + n), x.end());
        const std::vector<Array> u = eval_graph(b.lin.pe.unknown, args);
        std::vector<Array> cts(n);
        for (std::size_t q = 0; q < u.size(); ++q)
          cts[b.lin.unknown_input[q]] = u[q];
        std::vector<Array> out;
        for (std::int64_t p : diff) {
          const auto i = static_cast<std::size_t>(p);
          out.push_back(cts[i].valid() ? cts[i] : zeros(avals[i]));
        }
        return out;
      },
      in);
  ir::dce(g);
  return g;
}

Split split(const ir::Params& params, std::span<const AVal> avals, const PolicyPtr& policy) {
  const auto n = params.get<std::int64_t>("num_branches");
  std::vector<BranchLinear> branches;
  for (std::int64_t k = 0; k < n; ++k)
    branches.push_back(linearize_branch(cond_branch(params, k), avals, policy));
  Split s;
  s.slots = merge_residuals(branches);
  for (std::size_t p = 0; p < avals.size(); ++p)
    if (is_floating(avals[p].dtype)) s.diff.push_back(static_cast<std::int64_t>(p));
  for (const BranchLinear& b : branches) {
    s.res.push_back(std::make_shared<const ir::Graph>(residual_graph(b, avals, s.slots)));
    s.out.push_back(std::make_shared<const ir::Graph>(result_graph(b, s.slots)));
    s.vjp.push_back(std::make_shared<const ir::Graph>(backward_graph(b, avals, s.slots, s.diff)));
  }
  return s;
}

ir::Params branches_params(const std::vector<std::shared_ptr<const ir::Graph>>& branches) {
  ir::Params p{{"num_branches", static_cast<std::int64_t>(branches.size())}};
  for (std::size_t k = 0; k < branches.size(); ++k)
    p.set(cond_branch_param(static_cast<std::int64_t>(k)), branches[k]);
  return p;
}

// The residual cond's params.
ir::Params residual_params(const Split& s) {
  ir::Params p = branches_params(s.res);
  p.set("residuals", true);
  return p;
}

// The params of the cond that reads the residuals, with its branches' backward parts.
ir::Params result_params(const Split& s) {
  ir::Params p = branches_params(s.out);
  p.set("num_residuals", static_cast<std::int64_t>(s.slots.size()));
  p.set("vjp_operands", s.diff);
  for (std::size_t k = 0; k < s.vjp.size(); ++k)
    p.set(vjp_branch_param(static_cast<std::int64_t>(k)), s.vjp[k]);
  return p;
}

bool is_split(const ir::Params& params) {
  return params.has("residuals") || params.has("num_residuals");
}

std::vector<AVal> avals_of(std::span<const Array> xs) {
  std::vector<AVal> out;
  for (const Array& x : xs)
    out.push_back(x.aval());
  return out;
}

// The split cond bound on `ins` (index, operands): its operands (index, residuals, operands)
// and results.
std::pair<std::vector<Array>, std::vector<Array>> bind_split(const Split& s,
                                                             std::span<const Array> ins,
                                                             const ir::Params& result) {
  std::vector<Array> in{ins[0]};
  if (!s.slots.empty()) {
    const std::vector<Array> slots = ir::bind(lax::cond_p, ins, residual_params(s));
    in.insert(in.end(), slots.begin(), slots.end());
  }
  in.insert(in.end(), ins.begin() + 1, ins.end());
  std::vector<Array> outs = ir::bind(lax::cond_p, in, result);
  return {std::move(in), std::move(outs)};
}

// A split cond on the tape: its VJP rule reads the residuals among its operands.
struct CondEntry final : TapeEntry {
  ir::Eqn eqn;  // the cond that reads the residuals (only its primitive and params are read)
  TapeEqn tape;
  const std::vector<Array>& outputs() const override { return tape.outs; }
  void backward(Cotangents& cts) const override { backward_eqn(tape, cts); }
};

}  // namespace

std::unique_ptr<TapeEntry> replay_cond(const ir::Eqn& e, std::vector<Array> ins,
                                       TangentSet& tangents) {
  if (is_split(e.params) ||
      std::none_of(ins.begin(), ins.end(), [&](const Array& x) { return tangents.has(x); }))
    return replay_eqn(e, std::move(ins), tangents);
  const Split s = split(e.params, avals_of(std::span(ins).subspan(1)), nullptr);
  auto entry = std::make_unique<CondEntry>();
  entry->eqn = ir::Eqn{&lax::cond_p, {}, {}, result_params(s)};
  auto [in, outs] = bind_split(s, ins, entry->eqn.params);
  tangents.propagate(e, ins, outs);
  entry->tape = TapeEqn{&entry->eqn, std::move(in), std::move(outs)};
  return entry;
}

void split_cond(const ir::Eqn& e, const PolicyPtr& policy, ir::Graph& into) {
  if (is_split(e.params)) {
    into.eqns.push_back(e);
    return;
  }
  std::vector<AVal> avals;
  for (std::size_t i = 1; i < e.inputs.size(); ++i)
    avals.push_back(into.aval(e.inputs[i]));
  const Split s = split(e.params, avals, policy);
  std::vector<ir::Atom> in{e.inputs[0]};
  if (!s.slots.empty()) {
    std::vector<ir::VarId> slots;
    for (const AVal& a : s.slots) {
      slots.push_back(into.new_var(a));
      in.push_back(ir::Atom::of(slots.back()));
    }
    into.eqns.push_back(ir::Eqn{&lax::cond_p, e.inputs, std::move(slots), residual_params(s)});
  }
  in.insert(in.end(), e.inputs.begin() + 1, e.inputs.end());
  into.eqns.push_back(ir::Eqn{&lax::cond_p, std::move(in), e.outputs, result_params(s)});
}

bool is_residual_cond(const ir::Eqn& e) {
  return e.params.has("residuals");
}

std::vector<Array> cond_vjp(const ir::VjpArgs& a) {
  std::vector<Array> ins(a.inputs.begin(), a.inputs.end());
  ir::Params made;
  const ir::Params* params = &a.params;
  std::size_t offset = 0;  // residuals among the operands before the cond's own
  if (params->has("num_residuals")) {
    offset = static_cast<std::size_t>(params->get<std::int64_t>("num_residuals"));
  } else {
    FLAXPP_ASSERT(!params->has("residuals"), "cond: a residual cond gets no cotangent");
    const Split s = split(*params, avals_of(a.inputs.subspan(1)), nullptr);
    made = result_params(s);
    params = &made;
    ins = bind_split(s, a.inputs, made).first;
  }
  const auto n = params->get<std::int64_t>("num_branches");
  std::vector<std::shared_ptr<const ir::Graph>> backward;
  for (std::int64_t k = 0; k < n; ++k)
    backward.push_back(params->get<std::shared_ptr<const ir::Graph>>(vjp_branch_param(k)));
  for (std::size_t k = 0; k < a.cotangents.size(); ++k)
    ins.push_back(a.cotangents[k].valid() ? a.cotangents[k] : zeros(a.outputs[k].aval()));
  const std::vector<Array> cts = ir::bind(lax::cond_p, ins, branches_params(backward));
  const auto diff = params->get<std::vector<std::int64_t>>("vjp_operands");
  std::vector<Array> in_cts(a.inputs.size());
  for (std::size_t q = 0; q < diff.size(); ++q)
    in_cts[1 + offset + static_cast<std::size_t>(diff[q])] = cts[q];
  return in_cts;
}

}  // namespace flaxpp::transforms
