// The lifted transforms' shared steps: a copy run in its own scope state, and parameters
// stacked along a leading axis and read back.
#include "nn/lifted.hpp"

#include <algorithm>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/random/key.hpp"

namespace flaxpp::nn::internal {
namespace {

// The copies' arrays stacked along a new leading axis (init runs eagerly).
Array stack(const std::vector<Array>& copies, const std::string& where) {
  const Array& first = copies.front();
  for (const Array& a : copies)
    if (a.is_traced())
      throw ValueError(detail::str(where, ": init runs eagerly; call init outside jit/grad/vmap"));
  std::vector<std::int64_t> dims{static_cast<std::int64_t>(copies.size())};
  dims.insert(dims.end(), first.shape().dims().begin(), first.shape().dims().end());
  Backend& be = first.buffer().backend();
  std::shared_ptr<Buffer> out =
      be.allocate(first.nbytes() * static_cast<std::int64_t>(copies.size()));
  for (std::size_t i = 0; i < copies.size(); ++i)
    be.copy(copies[i].buffer(), 0, *out, static_cast<std::int64_t>(i) * first.nbytes(),
            first.nbytes());
  return Array(std::move(out), Shape(std::move(dims)), first.dtype());
}

// `tree` with `value` at `path` (the whole tree at the root: a lifted module that is the root).
void put(Tree& tree, const std::vector<std::string>& path, Tree value) {
  if (path.empty()) {
    tree = std::move(value);
  } else {
    tree.set_at(path, std::move(value));
  }
}

// A copy may create variables of the lifted collections only (Flax lifts the collections in
// variable_axes).
void check_lifted(const ScopeState& copy, const std::vector<std::string>& path,
                  const Collections& lifted, const std::string& where) {
  for (const std::string& collection : copy.variables.keys())
    if (std::find(lifted.begin(), lifted.end(), collection) == lifted.end() &&
        copy.variables[collection].find(path) != nullptr)
      throw ValueError(detail::str(where, " creates variables of the \"", collection,
                                   "\" collection, which it does not stack; add it to nn::scan's "
                                   "variable_axes (nn::vmap stacks only \"params\")"));
}

const Tree* variables_at(const ScopeState& state, const std::string& collection,
                         const std::vector<std::string>& path) {
  return state.variables.contains(collection) ? state.variables[collection].find(path) : nullptr;
}

}  // namespace

std::vector<random::Key> split_params_key(Scope& s, std::int64_t n, const std::string& where) {
  const ScopeState& state = *state_of(s);
  const auto key = state.rngs.find("params");
  if (key == state.rngs.end())
    throw ValueError(detail::str(where, ": init needs a \"params\" rng stream"));
  return random::split(key->second, n);
}

CopyRun run_copy(Scope& s, const random::Key& params_key, const RngCounters& counters,
                 const std::function<Array(Scope&)>& copy, const std::string& where,
                 const Collections& lifted) {
  auto state = std::make_shared<ScopeState>(*state_of(s));
  state->rngs.insert_or_assign("params", params_key);
  state->rng_counters = counters;
  Scope one = scope_at(state, s.path());
  CopyRun r{copy(one), {}, {}};
  check_lifted(*state, s.path(), lifted, where);
  for (const std::string& collection : lifted) {
    const Tree* made = variables_at(*state, collection, s.path());
    r.made.push_back(made != nullptr ? *made : Tree());
  }
  r.counters = std::move(state->rng_counters);
  return r;
}

void store_stacked(Scope& s, const std::string& collection, const std::vector<Tree>& made,
                   const std::string& where) {
  // Every copy made the same tree (one module); stack leaf by leaf.
  const std::size_t leaves = made.front().leaves().size();
  if (leaves == 0) return;
  std::vector<Array> stacked;
  for (std::size_t k = 0; k < leaves; ++k) {
    std::vector<Array> rows;
    for (const Tree& t : made)
      rows.push_back(t.leaves().at(k));
    stacked.push_back(stack(rows, where));
  }
  ScopeState& state = *state_of(s);
  Tree all = state.variables.contains(collection) ? state.variables[collection] : Tree();
  put(all, s.path(), made.front().with_leaves(stacked));
  state.variables.set(collection, std::move(all));
}

Tree stacked_variables(Scope& s, const std::string& collection, std::int64_t length,
                       const std::string& where, const std::string& expects) {
  const Tree* found = variables_at(*state_of(s), collection, s.path());
  const Tree stacked = found != nullptr ? *found : Tree();
  for (const auto& [path, leaf] : stacked.flatten())
    if (leaf.rank() == 0 || leaf.shape()[0] != length)
      throw ValueError(detail::str("apply: ", collection == "params" ? "parameter " : "variable ",
                                   collection, "/", s.path().empty() ? "" : s.path_str() + "/",
                                   path, " is ", leaf.aval(), ", but ", where, " ", expects,
                                   " and expects it stacked along a leading axis of ", length,
                                   "; are the variables from another model?"));
  return stacked;
}

std::shared_ptr<ScopeState> copy_state(Scope& s, const Collections& lifted,
                                       const std::vector<Tree>& rows, const RngCounters& counters,
                                       std::set<std::string> carries) {
  auto state = std::make_shared<ScopeState>(*state_of(s));
  for (std::size_t i = 0; i < lifted.size(); ++i) {
    Tree all = state->variables.contains(lifted[i]) ? state->variables[lifted[i]] : Tree();
    if (!rows[i].leaves().empty()) put(all, s.path(), rows[i]);
    state->variables.set(lifted[i], std::move(all));
  }
  state->rng_counters = counters;
  state->used_params.clear();
  // A copy's body runs traced, on a state of its own: writes leave it only where carried.
  state->copy_carries = std::move(carries);
  return state;
}

}  // namespace flaxpp::nn::internal
