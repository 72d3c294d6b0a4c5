// Partial evaluation of Graphs (the known/unknown split).
#include "transforms/partial_eval.hpp"

#include <algorithm>
#include <unordered_map>

namespace flaxpp::transforms {

namespace {

// Copies variables of a source graph into a destination graph on first use.
class VarMap {
 public:
  VarMap(const ir::Graph& src, ir::Graph& dst) : src_(src), dst_(dst) {}
  ir::VarId operator()(ir::VarId v) {
    auto [it, inserted] = map_.try_emplace(v, -1);
    if (inserted) it->second = dst_.new_var(src_.aval(v));
    return it->second;
  }
  bool has(ir::VarId v) const { return map_.count(v) != 0; }
  ir::Atom atom(const ir::Atom& a) { return a.is_literal() ? a : ir::Atom::of((*this)(a.var)); }
  // e, renamed into the destination graph and appended to its equations.
  void copy(const ir::Eqn& e) {
    ir::Eqn c{e.prim, {}, {}, e.params};
    for (const ir::Atom& a : e.inputs)
      c.inputs.push_back(atom(a));
    for (ir::VarId v : e.outputs)
      c.outputs.push_back((*this)(v));
    dst_.eqns.push_back(std::move(c));
  }

 private:
  const ir::Graph& src_;
  ir::Graph& dst_;
  std::unordered_map<ir::VarId, ir::VarId> map_;
};

// Equations computed from literals and constants alone (e.g. the zeros a VJP rule
// broadcasts) whose values only the unknown side reads: they run there, instead of being
// computed ahead and kept as residuals (JAX's transpose makes such values in the backward
// pass). `unknown` marks the unknown inputs; the result has one flag per equation.
std::vector<bool> constants_only_unknown_reads(const ir::Graph& graph, std::vector<bool> unknown) {
  const std::size_t n = graph.eqns.size();
  std::vector<bool> constant(graph.num_vars(), false), eqn_constant(n, false), eqn_known(n, false);
  for (ir::VarId v : graph.constvars)
    constant[static_cast<std::size_t>(v)] = true;
  auto is = [](const std::vector<bool>& flags, const ir::Atom& a) {
    return !a.is_literal() && flags[static_cast<std::size_t>(a.var)];
  };
  for (std::size_t i = 0; i < n; ++i) {
    const ir::Eqn& e = graph.eqns[i];
    bool all_constant = true, any_unknown = false;
    for (const ir::Atom& a : e.inputs) {
      all_constant = all_constant && (a.is_literal() || is(constant, a));
      any_unknown = any_unknown || is(unknown, a);
    }
    eqn_constant[i] = all_constant;
    eqn_known[i] = !any_unknown;
    for (ir::VarId v : e.outputs) {
      constant[static_cast<std::size_t>(v)] = all_constant;
      unknown[static_cast<std::size_t>(v)] = any_unknown;
    }
  }
  // What the known side reads: its outputs and the inputs of its other equations.
  std::vector<bool> known_reads(graph.num_vars(), false);
  for (const ir::Atom& a : graph.outvars)
    if (!a.is_literal() && !unknown[static_cast<std::size_t>(a.var)])
      known_reads[static_cast<std::size_t>(a.var)] = true;
  std::vector<bool> move(n, false);
  for (std::size_t i = n; i-- > 0;) {
    const ir::Eqn& e = graph.eqns[i];
    if (!eqn_known[i]) continue;
    const bool read =
        !eqn_constant[i] || std::any_of(e.outputs.begin(), e.outputs.end(), [&](ir::VarId v) {
          return known_reads[static_cast<std::size_t>(v)];
        });
    if (!read) {
      move[i] = true;
      continue;
    }
    for (const ir::Atom& a : e.inputs)
      if (!a.is_literal()) known_reads[static_cast<std::size_t>(a.var)] = true;
  }
  return move;
}

}  // namespace

PartialEvalResult partial_eval(const ir::Graph& graph, const std::vector<bool>& input_unknown) {
  FLAXPP_ASSERT(input_unknown.size() == graph.invars.size());
  std::vector<bool> unknown(graph.num_vars(), false);
  for (std::size_t i = 0; i < graph.invars.size(); ++i)
    unknown[static_cast<std::size_t>(graph.invars[i])] = input_unknown[i];
  std::vector<bool> is_const(graph.num_vars(), false);
  for (ir::VarId v : graph.constvars)
    is_const[static_cast<std::size_t>(v)] = true;

  PartialEvalResult r;
  VarMap kmap(graph, r.known), umap(graph, r.unknown);
  for (std::size_t i = 0; i < graph.invars.size(); ++i)
    if (!input_unknown[i]) r.known.invars.push_back(kmap(graph.invars[i]));
  for (std::size_t i = 0; i < graph.constvars.size(); ++i) {
    r.known.constvars.push_back(kmap(graph.constvars[i]));
    r.known.consts.push_back(graph.consts[i]);
  }

  // Residuals: known, non-constant values the unknown side reads, in first-use order.
  std::vector<ir::VarId> residuals;
  std::vector<bool> is_residual(graph.num_vars(), false);
  std::unordered_map<ir::VarId, std::size_t> const_index;
  for (std::size_t i = 0; i < graph.constvars.size(); ++i)
    const_index[graph.constvars[i]] = i;
  auto read_from_unknown = [&](const ir::Atom& a) {
    if (a.is_literal() || unknown[static_cast<std::size_t>(a.var)]) return;
    if (is_const[static_cast<std::size_t>(a.var)]) {
      if (!umap.has(a.var)) {
        r.unknown.constvars.push_back(umap(a.var));
        r.unknown.consts.push_back(graph.consts[const_index.at(a.var)]);
      }
      return;
    }
    if (!is_residual[static_cast<std::size_t>(a.var)]) {
      is_residual[static_cast<std::size_t>(a.var)] = true;
      residuals.push_back(a.var);
    }
  };

  const std::vector<bool> move = constants_only_unknown_reads(graph, unknown);
  std::vector<ir::Eqn> unknown_eqns;
  for (std::size_t i = 0; i < graph.eqns.size(); ++i) {
    const ir::Eqn& e = graph.eqns[i];
    bool any_unknown = move[i];
    for (const ir::Atom& a : e.inputs)
      any_unknown = any_unknown || (!a.is_literal() && unknown[static_cast<std::size_t>(a.var)]);
    if (!any_unknown) {
      kmap.copy(e);
      continue;
    }
    for (const ir::Atom& a : e.inputs)
      read_from_unknown(a);
    for (ir::VarId v : e.outputs)
      unknown[static_cast<std::size_t>(v)] = true;
    unknown_eqns.push_back(e);
  }
  for (const ir::Atom& a : graph.outvars) {
    const bool known_out = a.is_literal() || !unknown[static_cast<std::size_t>(a.var)];
    r.output_known.push_back(known_out);
  }

  // The unknown graph's inputs: residuals first (mapped before the equations so their ids are
  // stable), then the unknown inputs.
  for (ir::VarId v : residuals)
    r.unknown.invars.push_back(umap(v));
  for (std::size_t i = 0; i < graph.invars.size(); ++i)
    if (input_unknown[i]) r.unknown.invars.push_back(umap(graph.invars[i]));
  for (const ir::Eqn& e : unknown_eqns)
    umap.copy(e);
  for (std::size_t i = 0; i < graph.outvars.size(); ++i) {
    const ir::Atom& a = graph.outvars[i];
    if (r.output_known[i]) {
      r.known.outvars.push_back(kmap.atom(a));
    } else {
      r.unknown.outvars.push_back(umap.atom(a));
    }
  }
  for (ir::VarId v : residuals)
    r.known.outvars.push_back(ir::Atom::of(kmap(v)));
  r.num_residuals = residuals.size();
  return r;
}

}  // namespace flaxpp::transforms
