// cond() and switch_(): trace every branch into one cond equation; the cond primitive's shape
// rule and its eager evaluation (the chosen branch's graph). Its differentiation rules are in
// cond_ad.cpp.
#include "flaxpp/transforms/cond.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "flaxpp/transforms/trace.hpp"
#include "transforms/cond_ad.hpp"

namespace flaxpp::lax {
namespace {

std::vector<AVal> cond_avals(std::span<const AVal> in, const ir::Params& params) {
  FLAXPP_ASSERT(!in.empty() && in[0] == (AVal{Shape{}, DType::i32}),
                "cond: the first operand must be the int32[] branch index");
  const auto n = params.get<std::int64_t>("num_branches");
  std::vector<AVal> out;
  for (std::int64_t k = 0; k < n; ++k) {
    const ir::Graph& g = transforms::cond_branch(params, k);
    FLAXPP_ASSERT(g.invars.size() + 1 == in.size(), "cond: ", in.size() - 1,
                  " operands for branch ", k, " of ", g.invars.size(), " inputs");
    for (std::size_t i = 0; i < g.invars.size(); ++i)
      FLAXPP_ASSERT(in[i + 1] == g.aval(g.invars[i]), "cond operand ", i + 1, " is ", in[i + 1],
                    ", branch ", k, " expects ", g.aval(g.invars[i]));
    std::vector<AVal> outs;
    for (const ir::Atom& a : g.outvars)
      outs.push_back(g.aval(a));
    if (k == 0) out = outs;
    FLAXPP_ASSERT(outs == out, "cond: branch ", k, " returns other types than branch 0");
  }
  return out;
}

std::vector<Array> run_cond(std::span<const Array> in, const ir::Params& params) {
  const auto n = params.get<std::int64_t>("num_branches");
  const std::int64_t k = std::clamp<std::int64_t>(in[0].item<std::int32_t>(), 0, n - 1);
  return eval_graph(transforms::cond_branch(params, k), in.subspan(1));
}

// Each branch traced on the operands' avals, its captured values made operands: the graphs
// take (the captured values of every branch, in branch order; then the operands), so that
// all have one signature (JAX's _initial_style_jaxprs_with_common_consts).
struct Traced {
  std::vector<ir::Graph> branches;
  std::vector<Array> consts;
};

Traced trace_branches(std::span<const Branch> branches, std::span<const Array> operands) {
  std::vector<AVal> avals;
  for (const Array& x : operands)
    avals.push_back(x.aval());
  Traced t;
  std::vector<std::vector<Array>> own;  // per branch: the values it captured
  for (std::size_t k = 0; k < branches.size(); ++k) {
    t.branches.push_back(make_graph(
        [&](std::span<const Array> in) {
          std::vector<Array> out = branches[k](in);
          for (std::size_t j = 0; j < out.size(); ++j)
            if (!out[j].valid())
              throw ValueError(detail::str("cond: branch ", k, " returned a null Array as result ",
                                           j, "; every result must be an array"));
          return out;
        },
        avals));
    own.push_back(close_over_consts(t.branches.back()));
    t.consts.insert(t.consts.end(), own.back().begin(), own.back().end());
  }
  // Branch k reads its own captured values and ignores the others'.
  std::size_t offset = 0;
  for (std::size_t k = 0; k < t.branches.size(); ++k) {
    ir::Graph& g = t.branches[k];
    const std::size_t end = offset + own[k].size();
    std::vector<ir::VarId> before, after;
    for (std::size_t j = 0; j < offset; ++j)
      before.push_back(g.new_var(t.consts[j].aval()));
    for (std::size_t j = end; j < t.consts.size(); ++j)
      after.push_back(g.new_var(t.consts[j].aval()));
    g.invars.insert(g.invars.begin() + static_cast<std::ptrdiff_t>(own[k].size()), after.begin(),
                    after.end());
    g.invars.insert(g.invars.begin(), before.begin(), before.end());
    offset = end;
  }
  return t;
}

std::string types_of(const ir::Graph& g) {
  std::string s = "(";
  for (std::size_t j = 0; j < g.outvars.size(); ++j)
    s += (j ? ", " : "") + g.aval(g.outvars[j]).str();
  return s + ")";
}

// cond's index: 1 where the scalar `pred` is true (non-zero), else 0.
Array branch_index(const Array& pred) {
  if (pred.rank() != 0)
    throw ValueError(detail::str("cond: the predicate must be a scalar, got ", pred.aval(),
                                 "; reduce it first, e.g. with all() or any()"));
  const Array truth = pred.dtype() == DType::bool_ ? pred : ne(pred, full_like(pred, 0.0));
  return convert_element_type(truth, DType::i32);
}

}  // namespace

const ir::Primitive cond_p("cond", cond_avals, transforms::cond_vjp, run_cond);

namespace {
// Reads its index on the host; differentiated by splitting each branch into its forward and
// backward parts (cond_ad.cpp), also for a region's policy.
const bool cond_rules_registered = [] {
  ir::register_effects(cond_p, {.host_sync = true});
  transforms::register_reverse_rule(cond_p, {.replay = transforms::replay_cond,
                                             .split_in_region = transforms::split_cond,
                                             .saved_in_region = transforms::is_residual_cond});
  return true;
}();
}  // namespace

std::vector<Array> switch_(const Array& index, std::span<const Branch> branches,
                           std::span<const Array> operands) {
  if (branches.empty()) throw ValueError("switch: no branches; pass at least one");
  if (index.rank() != 0 || !is_integer(index.dtype()))
    throw ValueError(detail::str("switch: the index must be an integer scalar, got ", index.aval(),
                                 "; compute a branch number, e.g. with ", "convert_element_type"));
  for (std::size_t j = 0; j < operands.size(); ++j)
    if (!operands[j].valid())
      throw ValueError(detail::str("cond: operand ", j, " is a null Array"));
  Traced t = trace_branches(branches, operands);
  for (std::size_t k = 1; k < t.branches.size(); ++k) {
    const ir::Graph& g = t.branches[k];
    bool same = g.outvars.size() == t.branches[0].outvars.size();
    for (std::size_t j = 0; same && j < g.outvars.size(); ++j)
      same = g.aval(g.outvars[j]) == t.branches[0].aval(t.branches[0].outvars[j]);
    if (!same)
      throw ValueError(
          detail::str("cond: every branch must return the same types; branch 0 returns ",
                      types_of(t.branches[0]), " but branch ", k, " returns ", types_of(g),
                      ". Make the branches agree, e.g. by casting or broadcasting their results"));
  }
  // JAX: index = clamp(0, convert_element_type(index, int32), n - 1).
  const auto last = static_cast<double>(branches.size() - 1);
  Array i = index.dtype() == DType::i32 ? index : convert_element_type(index, DType::i32);
  i = min(max(i, scalar(0.0, DType::i32)), scalar(last, DType::i32));
  ir::Params params{{"num_branches", static_cast<std::int64_t>(branches.size())}};
  for (std::size_t k = 0; k < t.branches.size(); ++k)
    params.set(transforms::cond_branch_param(static_cast<std::int64_t>(k)),
               std::make_shared<const ir::Graph>(std::move(t.branches[k])));
  std::vector<Array> in{i};
  in.insert(in.end(), t.consts.begin(), t.consts.end());
  in.insert(in.end(), operands.begin(), operands.end());
  return ir::bind(cond_p, in, params);
}

std::vector<Array> cond(const Array& pred, const Branch& true_fun, const Branch& false_fun,
                        std::span<const Array> operands) {
  const Array index = branch_index(pred);
  const Branch branches[] = {false_fun, true_fun};
  return switch_(index, branches, operands);
}

namespace {

// A branch on the leaves of `operand`'s structure, checked to return `first`'s structure (the
// first branch's, recorded when it is traced).
Branch on_leaves(const TreeBranch& f, const Tree& operand, std::size_t k,
                 std::optional<Tree>& first) {
  return [&f, &operand, k, &first](std::span<const Array> leaves) {
    const Tree out = f(operand.with_leaves(leaves));
    if (!first) {
      first = out;
    } else {
      std::vector<std::string> a, b;
      for (const auto& [path, leaf] : first->flatten())
        a.push_back(path);
      for (const auto& [path, leaf] : out.flatten())
        b.push_back(path);
      if (a != b)
        throw ValueError(detail::str("cond: branch ", k,
                                     " returns a tree of another structure than branch 0's; "
                                     "every branch must return the same structure"));
    }
    return out.leaves();
  };
}

}  // namespace

Tree switch_(const Array& index, std::span<const TreeBranch> branches, const Tree& operand) {
  std::optional<Tree> first;
  std::vector<Branch> flat;
  for (std::size_t k = 0; k < branches.size(); ++k)
    flat.push_back(on_leaves(branches[k], operand, k, first));
  const std::vector<Array> leaves = operand.leaves();
  const std::vector<Array> out = switch_(index, flat, leaves);
  return first ? first->with_leaves(out) : Tree();
}

Tree cond(const Array& pred, const TreeBranch& true_fun, const TreeBranch& false_fun,
          const Tree& operand) {
  const Array index = branch_index(pred);
  const TreeBranch branches[] = {false_fun, true_fun};
  return switch_(index, branches, operand);
}

}  // namespace flaxpp::lax
