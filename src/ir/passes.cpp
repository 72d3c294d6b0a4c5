// Graph passes: dead-code elimination and common-subexpression elimination.
#include "flaxpp/ir/passes.hpp"

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace flaxpp::ir {

void dce(Graph& graph) {
  std::vector<bool> live(graph.num_vars(), false);
  for (const Atom& a : graph.outvars)
    if (!a.is_literal()) live[static_cast<std::size_t>(a.var)] = true;
  std::vector<Eqn> kept;
  for (auto it = graph.eqns.rbegin(); it != graph.eqns.rend(); ++it) {
    bool needed = false;
    for (VarId v : it->outputs)
      needed = needed || live[static_cast<std::size_t>(v)];
    if (!needed) continue;
    for (const Atom& a : it->inputs)
      if (!a.is_literal()) live[static_cast<std::size_t>(a.var)] = true;
    kept.push_back(std::move(*it));
  }
  graph.eqns.assign(std::make_move_iterator(kept.rbegin()), std::make_move_iterator(kept.rend()));
  // Constants nothing reads any more are dropped too.
  std::vector<VarId> constvars;
  std::vector<Array> consts;
  for (std::size_t i = 0; i < graph.constvars.size(); ++i) {
    if (!live[static_cast<std::size_t>(graph.constvars[i])]) continue;
    constvars.push_back(graph.constvars[i]);
    consts.push_back(graph.consts[i]);
  }
  graph.constvars = std::move(constvars);
  graph.consts = std::move(consts);
}

namespace {

bool holds_subgraph(const Eqn& e) {
  bool found = false;
  for_each_subgraph(e, [&](const std::string&, const Graph&) { found = true; });
  return found;
}

// An input's identity for comparison: "v<id>" for a variable; for a host literal its dtype and
// bytes; a literal on a device (not read here) is unique.
std::string atom_key(const Atom& a, std::size_t unique) {
  if (!a.is_literal()) return detail::str("v", a.var);
  if (a.literal.device().kind != DeviceKind::cpu || a.literal.is_traced())
    return detail::str("u", unique);
  std::string bytes(static_cast<std::size_t>(a.literal.nbytes()), '\0');
  if (!bytes.empty()) std::memcpy(bytes.data(), a.literal.buffer().data(), bytes.size());
  return detail::str("l", dtype_name(a.literal.dtype()), a.literal.shape(), ":", bytes);
}

}  // namespace

int cse(Graph& graph) {
  // Every variable read through `rename` (a merged equation's outputs name the first's).
  std::vector<VarId> rename(graph.num_vars());
  for (std::size_t v = 0; v < rename.size(); ++v)
    rename[v] = static_cast<VarId>(v);
  auto renamed = [&](Atom& a) {
    if (!a.is_literal()) a.var = rename[static_cast<std::size_t>(a.var)];
  };
  // Equations seen, by primitive and inputs; params are compared on a match.
  std::multimap<std::string, std::size_t> seen;
  int merged = 0;
  for (std::size_t i = 0; i < graph.eqns.size(); ++i) {
    Eqn& e = graph.eqns[i];
    for (Atom& a : e.inputs)
      renamed(a);
    if (holds_subgraph(e)) continue;
    std::string key = e.prim->name();
    for (std::size_t k = 0; k < e.inputs.size(); ++k) {
      key += '|';
      key += atom_key(e.inputs[k], i);
    }
    bool found = false;
    for (auto [it, end] = seen.equal_range(key); it != end && !found; ++it) {
      const Eqn& first = graph.eqns[it->second];
      if (first.prim != e.prim || !(first.params == e.params) ||
          first.outputs.size() != e.outputs.size())
        continue;
      for (std::size_t k = 0; k < e.outputs.size(); ++k)
        rename[static_cast<std::size_t>(e.outputs[k])] = first.outputs[k];
      found = true;
    }
    if (found) {
      ++merged;
    } else {
      seen.emplace(std::move(key), i);
    }
  }
  for (Atom& a : graph.outvars)
    renamed(a);
  if (merged > 0) dce(graph);
  return merged;
}

}  // namespace flaxpp::ir
