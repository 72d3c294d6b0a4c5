// nn::scan: the lifted scan over layers. Init runs the layers one after the other, each in a
// copy of the scope state with its own params key, and stacks what they create; apply scans
// the module over the stacked parameters (one traced layer, flaxpp::scan).
#include "flaxpp/nn/scan.hpp"

#include <set>

#include "flaxpp/transforms/scan.hpp"
#include "nn/lifted.hpp"

namespace flaxpp::nn::internal {
namespace {

Array init_layers(Scope& s, const std::string& where, std::int64_t length, const ScanLayer& layer,
                  const Array& carry) {
  const std::vector<random::Key> keys = split_params_key(s, length, where);
  // Layer i from rng counters `counters` on x.
  auto run = [&](std::int64_t i, const RngCounters& counters, const Array& x) {
    return run_copy(
        s, keys[static_cast<std::size_t>(i)], counters, [&](Scope& one) { return layer(one, x); },
        where);
  };
  ScopeState& state = *state_of(s);
  // Flax traces the scanned body twice (axes_scan's pass over the broadcast variables, then
  // lax.scan's), and the rng counters run on through both: every key a layer draws comes
  // from the counters of one layer further on. A first run of layer 0 advances them so.
  const RngCounters counters = run(0, state.rng_counters, carry).counters;
  std::vector<Tree> made;
  RngCounters counters_after;
  Array x = carry;
  for (std::int64_t i = 0; i < length; ++i) {
    CopyRun r = run(i, counters, x);
    if (!r.out.valid() || r.out.aval() != carry.aval())
      throw ValueError(detail::str(
          where, ": the scanned layer must return the carry's shape and dtype, ", carry.aval(),
          ", but layer ", i, " returned ", r.out.valid() ? r.out.aval().str() : "a null Array",
          "; nn::scan passes each layer's output to the next as its carry"));
    x = r.out;
    made.push_back(std::move(r.params));
    if (i == 0) counters_after = std::move(r.counters);
  }
  store_stacked(s, made, where);
  state.rng_counters = std::move(counters_after);
  return x;
}

Array apply_layers(Scope& s, const std::string& where, std::int64_t length, const ScanLayer& layer,
                   const Array& carry) {
  const Tree stacked = stacked_params(s, length, where, detail::str("scans ", length, " layers"));
  const std::vector<Array> xs = stacked.leaves();
  ScopeState& state = *state_of(s);
  RngCounters counters = state.rng_counters;
  RngCounters counters_after = counters;
  std::set<std::string> used;
  const ScanBody body = [&](std::span<const Array> c, std::span<const Array> rows) {
    const std::shared_ptr<ScopeState> layer_state = copy_state(s, stacked, rows, counters);
    Scope one = scope_at(layer_state, s.path());
    const Array next = layer(one, c[0]);
    if (next.aval() != c[0].aval())
      throw ValueError(detail::str(where,
                                   ": the scanned module must return its input's shape "
                                   "and dtype, ",
                                   c[0].aval(), ", got ", next.aval()));
    counters_after = layer_state->rng_counters;
    used = layer_state->used_params;
    return ScanResult{{next}, {}};
  };
  const std::span<const Array> init(&carry, 1);
  Array out = flaxpp::scan(body, init, xs, length).carry[0];
  if (counters_after != counters) {
    // The layer draws keys (dropout): Flax traces the scanned body twice, its counters running
    // on, and the keys of the second trace are the ones used; trace again from there.
    counters = counters_after;
    out = flaxpp::scan(body, init, xs, length).carry[0];
  }
  state.rng_counters = std::move(counters_after);
  state.used_params.insert(used.begin(), used.end());
  return out;
}

}  // namespace

Array scan_layers(Scope& s, const std::string& class_name, std::int64_t length,
                  const ScanLayer& layer, const Array& carry) {
  const std::string where = detail::str(class_name, " at ", s.path_str());
  if (length < 1)
    throw ValueError(
        detail::str(where, ": length must be >= 1 (the number of layers), got ", length));
  return s.is_initializing() ? init_layers(s, where, length, layer, carry)
                             : apply_layers(s, where, length, layer, carry);
}

}  // namespace flaxpp::nn::internal
