// Graph passes: dead-code elimination, common-subexpression elimination, splitting fused
// updates by group and scheduling equations that free memory early.
#include "flaxpp/ir/passes.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/primitive_rules.hpp"

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

namespace {

// Appends `body`'s equations to `eqns`, its variables renamed into `graph` (its inputs read
// `args`); returns the atoms its results are.
std::vector<Atom> inline_body(Graph& graph, const Graph& body, const std::vector<Atom>& args,
                              std::vector<Eqn>& eqns, int& inlined) {
  std::vector<Atom> env(body.num_vars());
  for (std::size_t i = 0; i < body.invars.size(); ++i)
    env[static_cast<std::size_t>(body.invars[i])] = args[i];
  for (std::size_t i = 0; i < body.constvars.size(); ++i) {
    const VarId v = graph.new_var(body.aval(body.constvars[i]));
    graph.constvars.push_back(v);
    graph.consts.push_back(body.consts[i]);
    env[static_cast<std::size_t>(body.constvars[i])] = Atom::of(v);
  }
  const auto renamed = [&](const Atom& a) {
    return a.is_literal() ? a : env[static_cast<std::size_t>(a.var)];
  };
  for (const Eqn& e : body.eqns) {
    std::vector<Atom> inputs;
    for (const Atom& a : e.inputs)
      inputs.push_back(renamed(a));
    if (call_body(*e.prim) != nullptr) {
      ++inlined;
      const std::vector<Atom> results = inline_body(graph, call_graph(e), inputs, eqns, inlined);
      for (std::size_t k = 0; k < e.outputs.size(); ++k)
        env[static_cast<std::size_t>(e.outputs[k])] = results[k];
      continue;
    }
    Eqn copy{e.prim, std::move(inputs), {}, e.params};
    for (const VarId v : e.outputs) {
      const VarId w = graph.new_var(body.aval(v));
      env[static_cast<std::size_t>(v)] = Atom::of(w);
      copy.outputs.push_back(w);
    }
    eqns.push_back(std::move(copy));
  }
  std::vector<Atom> results;
  for (const Atom& a : body.outvars)
    results.push_back(renamed(a));
  return results;
}

}  // namespace

int inline_calls(Graph& graph) {
  int inlined = 0;
  std::vector<Eqn> eqns;
  // A call's results become other atoms: every later read goes through `rename`.
  std::vector<Atom> rename(graph.num_vars());
  for (std::size_t v = 0; v < rename.size(); ++v)
    rename[v] = Atom::of(static_cast<VarId>(v));
  const auto renamed = [&](const Atom& a) {
    return a.is_literal() ? a : rename[static_cast<std::size_t>(a.var)];
  };
  std::vector<Eqn> old = std::move(graph.eqns);
  graph.eqns.clear();
  for (Eqn& e : old) {
    for (Atom& a : e.inputs)
      a = renamed(a);
    if (call_body(*e.prim) == nullptr) {
      eqns.push_back(std::move(e));
      continue;
    }
    ++inlined;
    const std::vector<Atom> results = inline_body(graph, call_graph(e), e.inputs, eqns, inlined);
    for (std::size_t k = 0; k < e.outputs.size(); ++k)
      rename[static_cast<std::size_t>(e.outputs[k])] = results[k];
  }
  for (Atom& a : graph.outvars)
    a = renamed(a);
  graph.eqns = std::move(eqns);
  return inlined;
}

int rewrite_subgraphs(Graph& graph, const std::function<void(Graph&)>& rewrite) {
  // Keyed by the original, which the map holds, so that no other graph takes its address.
  std::map<std::shared_ptr<const Graph>, std::shared_ptr<const Graph>> rewritten;
  for (Eqn& e : graph.eqns) {
    // The replacements are collected first: setting a param while iterating would invalidate
    // the iteration.
    std::vector<std::pair<std::string, std::shared_ptr<const Graph>>> replaced;
    for (const auto& [name, value] : e.params.items()) {
      const auto* sub = std::get_if<std::shared_ptr<const Graph>>(&value);
      if (sub == nullptr || !*sub) continue;
      std::shared_ptr<const Graph>& copy = rewritten[*sub];
      if (!copy) {
        Graph g = **sub;
        rewrite(g);
        copy = std::make_shared<const Graph>(std::move(g));
      }
      replaced.emplace_back(name, copy);
    }
    for (auto& [name, sub] : replaced)
      e.params.set(name, std::move(sub));
  }
  return static_cast<int>(rewritten.size());
}

int split_fused_groups(Graph& graph) {
  int split = 0;
  std::vector<Eqn> eqns;
  eqns.reserve(graph.eqns.size());
  for (Eqn& e : graph.eqns) {
    if (e.prim != &lax::fused_elementwise_p) {
      eqns.push_back(std::move(e));
      continue;
    }
    const auto& program = e.params.get<std::shared_ptr<const ElementwiseProgram>>("program");
    const auto scalars = static_cast<std::size_t>(program->num_scalars);
    const auto per_group = static_cast<std::size_t>(program->num_inputs);
    const std::size_t per_output = program->results_per_group();
    const std::size_t groups = (e.inputs.size() - scalars) / per_group;
    if (groups <= 1) {
      eqns.push_back(std::move(e));
      continue;
    }
    ++split;
    for (std::size_t g = 0; g < groups; ++g) {
      Eqn one{e.prim, {}, {}, e.params};
      one.inputs.assign(e.inputs.begin(), e.inputs.begin() + static_cast<std::ptrdiff_t>(scalars));
      const auto first = e.inputs.begin() + static_cast<std::ptrdiff_t>(scalars + g * per_group);
      one.inputs.insert(one.inputs.end(), first, first + static_cast<std::ptrdiff_t>(per_group));
      const auto out = e.outputs.begin() + static_cast<std::ptrdiff_t>(g * per_output);
      one.outputs.assign(out, out + static_cast<std::ptrdiff_t>(per_output));
      eqns.push_back(std::move(one));
    }
  }
  graph.eqns = std::move(eqns);
  return split;
}

int schedule_early_frees(Graph& graph, const std::vector<bool>& donated) {
  FLAXPP_ASSERT(donated.size() == graph.invars.size(), "schedule_early_frees: ", donated.size(),
                " donation flags for ", graph.invars.size(), " inputs");
  const std::size_t num_vars = graph.num_vars();
  // Which variables an equation may free: its own values and donated inputs; never constants,
  // the caller's inputs or the graph's outputs.
  std::vector<bool> freeable(num_vars, true);
  for (const VarId v : graph.constvars)
    freeable[static_cast<std::size_t>(v)] = false;
  for (std::size_t i = 0; i < graph.invars.size(); ++i)
    if (!donated[i]) freeable[static_cast<std::size_t>(graph.invars[i])] = false;
  for (const Atom& a : graph.outvars)
    if (!a.is_literal()) freeable[static_cast<std::size_t>(a.var)] = false;
  // The last reader of each variable. Moving an equation never changes it: an equation moves
  // only above readers of what it does not read last.
  std::vector<const Eqn*> last_reader(num_vars, nullptr);
  for (const Eqn& e : graph.eqns)
    for (const Atom& a : e.inputs)
      if (!a.is_literal()) last_reader[static_cast<std::size_t>(a.var)] = &e;
  const auto bytes = [&](VarId v) { return graph.aval(v).nbytes(); };

  // The new order, as indices into graph.eqns; an equation moves to just after the last one
  // (so far) that it must follow.
  std::vector<std::size_t> order;
  order.reserve(graph.eqns.size());
  std::vector<std::ptrdiff_t> defined_at(num_vars, -1);  // index in `order` (inputs: -1)
  int moved = 0;
  for (std::size_t i = 0; i < graph.eqns.size(); ++i) {
    const Eqn& e = graph.eqns[i];
    std::vector<VarId> frees;
    for (const Atom& a : e.inputs)
      if (!a.is_literal() && last_reader[static_cast<std::size_t>(a.var)] == &e &&
          freeable[static_cast<std::size_t>(a.var)] &&
          std::find(frees.begin(), frees.end(), a.var) == frees.end())
        frees.push_back(a.var);
    std::int64_t freed = 0, made = 0;
    bool scalars_only = !e.outputs.empty();
    for (const VarId v : frees)
      freed += bytes(v);
    for (const VarId v : e.outputs) {
      made += bytes(v);
      scalars_only = scalars_only && graph.aval(v).shape.rank() == 0;
    }
    bool has_subgraph = false;
    for_each_subgraph(e, [&](const std::string&, const Graph&) { has_subgraph = true; });
    std::ptrdiff_t after = static_cast<std::ptrdiff_t>(order.size()) - 1;
    // A collective (an all_reduce of gradients) moves up as soon as it frees what it makes:
    // each bucket is reduced once its gradients are final, and the updates that read it follow.
    const bool collective = is_collective(e) && freed >= made;
    if (!has_subgraph && (freed > made || scalars_only || collective)) {
      // Right after the latest definition of an operand and the latest other reader of an
      // operand it frees.
      after = -1;
      for (const Atom& a : e.inputs)
        if (!a.is_literal()) after = std::max(after, defined_at[static_cast<std::size_t>(a.var)]);
      for (std::ptrdiff_t k = static_cast<std::ptrdiff_t>(order.size()) - 1; k > after; --k) {
        const Eqn& other = graph.eqns[order[static_cast<std::size_t>(k)]];
        const bool reads =
            std::any_of(other.inputs.begin(), other.inputs.end(), [&](const Atom& a) {
              return !a.is_literal() && std::find(frees.begin(), frees.end(), a.var) != frees.end();
            });
        if (reads) {
          after = k;
          break;
        }
      }
    }
    const auto at = static_cast<std::size_t>(after + 1);
    if (at < order.size()) {
      ++moved;
      order.insert(order.begin() + static_cast<std::ptrdiff_t>(at), i);
      for (std::size_t v = 0; v < num_vars; ++v)
        if (defined_at[v] >= static_cast<std::ptrdiff_t>(at)) ++defined_at[v];
    } else {
      order.push_back(i);
    }
    for (const VarId v : e.outputs)
      defined_at[static_cast<std::size_t>(v)] = static_cast<std::ptrdiff_t>(at);
  }
  if (moved == 0) return 0;
  std::vector<Eqn> eqns;
  eqns.reserve(order.size());
  for (const std::size_t i : order)
    eqns.push_back(std::move(graph.eqns[i]));
  graph.eqns = std::move(eqns);
  return moved;
}

}  // namespace flaxpp::ir
