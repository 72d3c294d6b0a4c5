// overlap_collectives: a collective that can run in the background becomes a start and a
// done, and the done waits as late as the next collective's start, so that the processes
// exchange one gradient bucket while this one computes the next (DDP's overlap of the
// all-reduce with the backward pass; XLA's async collective pairs).
#include <unordered_map>
#include <vector>

#include "flaxpp/ir/passes.hpp"
#include "flaxpp/ir/primitive_rules.hpp"

namespace flaxpp::ir {
namespace {

struct AsyncPair {
  const Primitive* start;
  const Primitive* done;
};

std::unordered_map<const Primitive*, AsyncPair>& async_pairs() {
  static std::unordered_map<const Primitive*, AsyncPair> pairs;
  return pairs;
}

bool is_start(const Eqn& e) {
  for (const auto& [sync, pair] : async_pairs())
    if (e.prim == pair.start) return true;
  return false;
}
bool is_done(const Eqn& e) {
  for (const auto& [sync, pair] : async_pairs())
    if (e.prim == pair.done) return true;
  return false;
}

// Moves the done at `i`, with the equations before `end` that read what it makes (directly or
// through each other), to just before `end`; the others keep their order. Legal because no
// equation left behind reads a moved one.
void sink(std::vector<Eqn>& eqns, std::size_t i, std::size_t end, std::size_t num_vars) {
  std::vector<bool> moved_var(num_vars, false);
  std::vector<Eqn> kept, moved;
  for (std::size_t j = i; j < end; ++j) {
    Eqn& e = eqns[j];
    bool reads_moved = j == i;
    for (const Atom& a : e.inputs)
      reads_moved = reads_moved || (!a.is_literal() && moved_var[static_cast<std::size_t>(a.var)]);
    if (reads_moved)
      for (const VarId v : e.outputs)
        moved_var[static_cast<std::size_t>(v)] = true;
    (reads_moved ? moved : kept).push_back(std::move(e));
  }
  std::size_t at = i;
  for (std::vector<Eqn>* part : {&kept, &moved})
    for (Eqn& e : *part)
      eqns[at++] = std::move(e);
}

}  // namespace

void register_async_collective(const Primitive& sync, const Primitive& start,
                               const Primitive& done) {
  async_pairs()[&sync] = {&start, &done};
  for (const Primitive* half : {&start, &done})
    register_effects(*half, {.collective = true, .async_half = true});
}

int overlap_collectives(Graph& graph) {
  if (async_pairs().empty()) return 0;
  std::vector<Eqn> eqns;
  eqns.reserve(graph.eqns.size());
  int split = 0;
  for (Eqn& e : graph.eqns) {
    const auto it = async_pairs().find(e.prim);
    if (it == async_pairs().end()) {
      eqns.push_back(std::move(e));
      continue;
    }
    Eqn start{it->second.start, std::move(e.inputs), {}, e.params};
    Eqn done{it->second.done, {}, std::move(e.outputs), std::move(e.params)};
    for (const VarId v : done.outputs) {
      start.outputs.push_back(graph.new_var(graph.aval(v)));
      done.inputs.push_back(Atom::of(start.outputs.back()));
    }
    eqns.push_back(std::move(start));
    eqns.push_back(std::move(done));
    ++split;
  }
  graph.eqns = std::move(eqns);
  if (split == 0) return 0;
  // Each done, with what depends on it, waits until just before the next start (a done
  // already there moves nothing).
  for (std::size_t i = 0; i < graph.eqns.size(); ++i) {
    if (!is_done(graph.eqns[i])) continue;
    std::size_t end = i + 1;
    while (end < graph.eqns.size() && !is_start(graph.eqns[end]))
      ++end;
    sink(graph.eqns, i, end, graph.num_vars());
  }
  return split;
}

}  // namespace flaxpp::ir
