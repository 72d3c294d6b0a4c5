// What the lifted transforms over copies of a module share (nn::scan's layers, nn::vmap's
// members): each copy runs in a copy of the scope state at the lifted module's path, draws its
// parameters from its own "params" key, and the variables of the lifted collections ("params",
// and for nn::scan those of its variable_axes) are stacked along a new leading axis; a copy
// that makes variables of another collection is refused. Private to the nn layer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn::internal {

using RngCounters = decltype(ScopeState::rng_counters);

// The "params" keys of `n` copies during init: split(s's "params" key, n), as Flax's
// split_rngs={"params": True} splits it.
std::vector<random::Key> split_params_key(Scope& s, std::int64_t n, const std::string& where);
using Collections = std::vector<std::string>;  // "params" first

// One copy's run during init: its output, the variables it made of each lifted collection (at
// the lifted module's path, empty where none) and the rng counters after it.
struct CopyRun {
  Array out;
  std::vector<Tree> made;  // per lifted collection, in their order
  RngCounters counters;
};
// Runs `copy` in a copy of s's state with `params_key` as its "params" key and `counters` as
// its rng counters; `where` names the lifted module in errors.
CopyRun run_copy(Scope& s, const random::Key& params_key, const RngCounters& counters,
                 const std::function<Array(Scope&)>& copy, const std::string& where,
                 const Collections& lifted = {"params"});
// Stores the variables of `collection` the copies made, stacked leaf by leaf along a new
// leading axis, at s's path (init runs eagerly).
void store_stacked(Scope& s, const std::string& collection, const std::vector<Tree>& made,
                   const std::string& where);
// The stacked variables of `collection` at s's path (empty where the module has none), each
// leaf checked to lead with `length`; `expects` says why, in errors ("scans 4 layers").
Tree stacked_variables(Scope& s, const std::string& collection, std::int64_t length,
                       const std::string& where, const std::string& expects);
// A state for one copy during apply: s's, with `rows[i]` (one copy's variables of
// `lifted[i]`) at s's path, `counters` as its rng counters, and `carries` the collections its
// writes may reach (put_variable refuses the others).
std::shared_ptr<ScopeState> copy_state(Scope& s, const Collections& lifted,
                                       const std::vector<Tree>& rows, const RngCounters& counters,
                                       std::set<std::string> carries = {});

}  // namespace flaxpp::nn::internal
