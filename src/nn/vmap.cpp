// nn::vmap: the lifted ensemble. Init runs the members one after the other, each in a copy of
// the scope state with its own params key, and stacks what they create and return; apply maps
// the module over the stacked parameters (one traced member, flaxpp::vmap).
#include "flaxpp/nn/vmap.hpp"

#include <set>

#include "flaxpp/ops/slicing.hpp"
#include "flaxpp/transforms/vmap.hpp"
#include "nn/lifted.hpp"

namespace flaxpp::nn::internal {
namespace {

Array init_members(Scope& s, const std::string& where, std::int64_t size, const Member& member,
                   const Array& x) {
  const std::vector<random::Key> keys = split_params_key(s, size, where);
  ScopeState& state = *state_of(s);
  const RngCounters counters = state.rng_counters;
  std::vector<Tree> made;
  std::vector<Array> outs;
  RngCounters counters_after;
  for (std::int64_t i = 0; i < size; ++i) {
    CopyRun r = run_copy(
        s, keys[static_cast<std::size_t>(i)], counters, [&](Scope& one) { return member(one, x); },
        where);
    outs.push_back(std::move(r.out));
    made.push_back(std::move(r.made[0]));
    if (i == 0) counters_after = std::move(r.counters);
  }
  store_stacked(s, "params", made, where);
  state.rng_counters = std::move(counters_after);
  return stack(outs);
}

Array apply_members(Scope& s, const std::string& where, std::int64_t size, const Member& member,
                    const Array& x) {
  const Tree stacked =
      stacked_variables(s, "params", size, where, detail::str("maps ", size, " members"));
  std::vector<Array> args = stacked.leaves();
  const std::size_t leaves = args.size();
  args.push_back(x);
  ScopeState& state = *state_of(s);
  const RngCounters counters = state.rng_counters;
  RngCounters counters_after = counters;
  std::set<std::string> used;
  const ArrayFn one = [&](std::span<const Array> in) {
    const std::shared_ptr<ScopeState> member_state =
        copy_state(s, {"params"}, {stacked.with_leaves(in.first(leaves))}, counters);
    Scope scope = scope_at(member_state, s.path());
    std::vector<Array> out{member(scope, in[leaves])};
    counters_after = member_state->rng_counters;
    used = member_state->used_params;
    return out;
  };
  flaxpp::VmapOptions options;
  options.in_axes.assign(leaves, 0);
  options.in_axes.push_back(not_mapped);
  options.axis_size = size;
  Array out = flaxpp::vmap(one, std::move(options))(args)[0];
  state.rng_counters = std::move(counters_after);
  state.used_params.insert(used.begin(), used.end());
  return out;
}

}  // namespace

Array vmap_members(Scope& s, const std::string& class_name, std::int64_t size, const Member& member,
                   const Array& x) {
  const std::string where = detail::str(class_name, " at ", s.path_str());
  if (size < 1)
    throw ValueError(
        detail::str(where, ": axis_size must be >= 1 (the number of members), got ", size));
  return s.is_initializing() ? init_members(s, where, size, member, x)
                             : apply_members(s, where, size, member, x);
}

}  // namespace flaxpp::nn::internal
