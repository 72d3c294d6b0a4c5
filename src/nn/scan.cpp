// nn::scan: the lifted scan over layers. Init runs the layers one after the other, each in a
// copy of the scope state with its own params key, and stacks what they create; apply scans
// the module over the stacked variables (one traced layer, flaxpp::scan), the layers' new
// values of the other collections of variable_axes (batch statistics) coming out as the
// scan's stacked results.
#include "flaxpp/nn/scan.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "flaxpp/transforms/scan.hpp"
#include "nn/lifted.hpp"

namespace flaxpp::nn::internal {
namespace {

Array init_layers(Scope& s, const std::string& where, std::int64_t length, const ScanLayer& layer,
                  const Array& carry, const Collections& lifted) {
  const std::vector<random::Key> keys = split_params_key(s, length, where);
  // Layer i from rng counters `counters` on x.
  auto run = [&](std::int64_t i, const RngCounters& counters, const Array& x) {
    return run_copy(
        s, keys[static_cast<std::size_t>(i)], counters, [&](Scope& one) { return layer(one, x); },
        where, lifted);
  };
  ScopeState& state = *state_of(s);
  // Flax traces the scanned body twice (axes_scan's pass over the broadcast variables, then
  // lax.scan's), and the rng counters run on through both: every key a layer draws comes
  // from the counters of one layer further on. A first run of layer 0 advances them so.
  const RngCounters counters = run(0, state.rng_counters, carry).counters;
  std::vector<std::vector<Tree>> made(lifted.size());  // per collection, per layer
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
    for (std::size_t c = 0; c < lifted.size(); ++c)
      made[c].push_back(std::move(r.made[c]));
    if (i == 0) counters_after = std::move(r.counters);
  }
  for (std::size_t c = 0; c < lifted.size(); ++c)
    store_stacked(s, lifted[c], made[c], where);
  state.rng_counters = std::move(counters_after);
  return x;
}

// Writes `tree` (the layers' stacked new values of `collection`) at s's path, leaf by leaf
// through put_variable, so that mutability and enclosing regions are honoured.
void put_stacked(Scope& s, const std::string& collection, const Tree& tree) {
  for (const auto& [path, leaf] : tree.flatten()) {
    std::vector<std::string> at = s.path();
    std::stringstream parts(path);
    for (std::string part; std::getline(parts, part, '/');)
      at.push_back(part);
    const std::string name = at.back();
    at.pop_back();
    scope_at(state_of(s), at).put_variable(collection, name, leaf);
  }
}

Array apply_layers(Scope& s, const std::string& where, std::int64_t length, const ScanLayer& layer,
                   const Array& carry, const Collections& lifted) {
  std::vector<Tree> stacked;
  std::vector<Array> xs;
  for (const std::string& collection : lifted) {
    stacked.push_back(
        stacked_variables(s, collection, length, where, detail::str("scans ", length, " layers")));
    for (Array& leaf : stacked.back().leaves())
      xs.push_back(std::move(leaf));
  }
  // The collections the layers may write now: those of variable_axes that are mutable.
  std::vector<std::size_t> carried;
  for (std::size_t c = 1; c < lifted.size(); ++c)
    if (s.is_mutable_collection(lifted[c])) carried.push_back(c);
  std::set<std::string> carries;
  for (const std::size_t c : carried)
    carries.insert(lifted[c]);
  ScopeState& state = *state_of(s);
  RngCounters counters = state.rng_counters;
  RngCounters counters_after = counters;
  std::set<std::string> used;
  const ScanBody body = [&](std::span<const Array> c, std::span<const Array> rows) {
    std::vector<Tree> layer_rows;
    std::size_t next_row = 0;
    for (const Tree& t : stacked) {
      const std::size_t n = t.leaves().size();
      layer_rows.push_back(t.with_leaves(rows.subspan(next_row, n)));
      next_row += n;
    }
    const std::shared_ptr<ScopeState> layer_state =
        copy_state(s, lifted, layer_rows, counters, carries);
    Scope one = scope_at(layer_state, s.path());
    const Array next = layer(one, c[0]);
    if (next.aval() != c[0].aval())
      throw ValueError(detail::str(where,
                                   ": the scanned module must return its input's shape "
                                   "and dtype, ",
                                   c[0].aval(), ", got ", next.aval()));
    std::vector<Array> ys;
    for (const std::size_t k : carried) {
      const Tree* now = layer_state->variables[lifted[k]].find(s.path());
      const std::vector<Array> values = now != nullptr ? now->leaves() : std::vector<Array>{};
      if (values.size() != stacked[k].leaves().size())
        throw ValueError(detail::str(where, ": a layer's \"", lifted[k],
                                     "\" variables changed their structure"));
      ys.insert(ys.end(), values.begin(), values.end());
    }
    counters_after = layer_state->rng_counters;
    used = layer_state->used_params;
    return ScanResult{{next}, std::move(ys)};
  };
  const std::span<const Array> init(&carry, 1);
  ScanResult result = flaxpp::scan(body, init, xs, length);
  if (counters_after != counters) {
    // The layer draws keys (dropout): Flax traces the scanned body twice, its counters running
    // on, and the keys of the second trace are the ones used; trace again from there.
    counters = counters_after;
    result = flaxpp::scan(body, init, xs, length);
  }
  state.rng_counters = std::move(counters_after);
  state.used_params.insert(used.begin(), used.end());
  std::size_t next_y = 0;
  for (const std::size_t k : carried) {
    const std::size_t n = stacked[k].leaves().size();
    put_stacked(s, lifted[k],
                stacked[k].with_leaves(std::span<const Array>(result.ys).subspan(next_y, n)));
    next_y += n;
  }
  return result.carry[0];
}

}  // namespace

Array scan_layers(Scope& s, const std::string& class_name, std::int64_t length,
                  const ScanLayer& layer, const Array& carry,
                  const std::vector<std::string>& variable_axes) {
  const std::string where = detail::str(class_name, " at ", s.path_str());
  if (length < 1)
    throw ValueError(
        detail::str(where, ": length must be >= 1 (the number of layers), got ", length));
  // "params" first, then the other collections, each once.
  Collections lifted{"params"};
  for (const std::string& c : variable_axes)
    if (std::find(lifted.begin(), lifted.end(), c) == lifted.end()) lifted.push_back(c);
  return s.is_initializing() ? init_layers(s, where, length, layer, carry, lifted)
                             : apply_layers(s, where, length, layer, carry, lifted);
}

}  // namespace flaxpp::nn::internal
