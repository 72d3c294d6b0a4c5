// nn::scan: the lifted scan over layers. Init runs the layers one after the other, each in a
// copy of the scope state with its own params key, and stacks what they create; apply scans
// the module over the stacked parameters (one traced layer, flaxpp::scan).
#include "flaxpp/nn/scan.hpp"

#include <set>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/transforms/scan.hpp"

namespace flaxpp::nn::internal {
namespace {

// Layer i's arrays stacked along a new leading axis (init runs eagerly).
Array stack(const std::vector<Array>& layers, const std::string& where) {
  const Array& first = layers.front();
  for (const Array& a : layers)
    if (a.is_traced())
      throw ValueError(
          detail::str("nn::scan at ", where, ": init runs eagerly; call init outside jit/grad"));
  std::vector<std::int64_t> dims{static_cast<std::int64_t>(layers.size())};
  dims.insert(dims.end(), first.shape().dims().begin(), first.shape().dims().end());
  Backend& be = first.buffer().backend();
  std::shared_ptr<Buffer> out =
      be.allocate(first.nbytes() * static_cast<std::int64_t>(layers.size()));
  for (std::size_t i = 0; i < layers.size(); ++i)
    be.copy(layers[i].buffer(), 0, *out, static_cast<std::int64_t>(i) * first.nbytes(),
            first.nbytes());
  return Array(std::move(out), Shape(std::move(dims)), first.dtype());
}

// `tree` with `value` at `path` (the whole tree at the root: a scan that is the root module).
void put(Tree& tree, const std::vector<std::string>& path, Tree value) {
  if (path.empty()) {
    tree = std::move(value);
  } else {
    tree.set_at(path, std::move(value));
  }
}

// A layer may create parameters only: Flax scans the collections in variable_axes, and
// flaxpp's nn::scan scans "params".
void check_only_params(const ScopeState& layer, const std::vector<std::string>& path,
                       const std::string& where) {
  for (const std::string& collection : layer.variables.keys())
    if (collection != "params" && layer.variables[collection].find(path) != nullptr)
      throw ValueError(detail::str(
          where, " creates variables of the \"", collection,
          "\" collection; nn::scan stacks only \"params\" (variable_axes={\"params\": 0})"));
}

Array init_layers(Scope& s, const std::string& where, std::int64_t length, const ScanLayer& layer,
                  const Array& carry) {
  const std::shared_ptr<ScopeState>& state = state_of(s);
  const auto params_key = state->rngs.find("params");
  if (params_key == state->rngs.end())
    throw ValueError(detail::str(where, ": init needs a \"params\" rng stream"));
  const std::vector<random::Key> keys = random::split(params_key->second, length);
  // Layer i from rng counters `counters`: its output, what it made, the counters after it.
  struct Layer {
    Array out;
    Tree params;
    decltype(state->rng_counters) counters;
  };
  auto run = [&](std::int64_t i, const decltype(state->rng_counters)& counters, const Array& x) {
    auto layer_state = std::make_shared<ScopeState>(*state);
    layer_state->rngs.insert_or_assign("params", keys[static_cast<std::size_t>(i)]);
    layer_state->rng_counters = counters;
    Scope one = scope_at(layer_state, s.path());
    Layer r{layer(one, x), Tree(), {}};
    check_only_params(*layer_state, s.path(), where);
    const Tree* params = layer_state->variables.contains("params")
                             ? layer_state->variables["params"].find(s.path())
                             : nullptr;
    if (params != nullptr) r.params = *params;
    r.counters = std::move(layer_state->rng_counters);
    return r;
  };
  // Flax traces the scanned body twice (axes_scan's pass over the broadcast variables, then
  // lax.scan's), and the rng counters run on through both: every key a layer draws comes
  // from the counters of one layer further on. A first run of layer 0 advances them so.
  const auto counters = run(0, state->rng_counters, carry).counters;
  std::vector<Tree> made;
  decltype(state->rng_counters) counters_after;
  Array x = carry;
  for (std::int64_t i = 0; i < length; ++i) {
    Layer r = run(i, counters, x);
    if (!r.out.valid() || r.out.aval() != carry.aval())
      throw ValueError(detail::str(
          where, ": the scanned layer must return the carry's shape and dtype, ", carry.aval(),
          ", but layer ", i, " returned ", r.out.valid() ? r.out.aval().str() : "a null Array",
          "; nn::scan passes each layer's output to the next as its carry"));
    x = r.out;
    made.push_back(std::move(r.params));
    if (i == 0) counters_after = std::move(r.counters);
  }
  // Every layer made the same tree (one module); stack leaf by leaf.
  std::vector<Array> stacked;
  const std::size_t leaves = made.front().leaves().size();
  for (std::size_t k = 0; k < leaves; ++k) {
    std::vector<Array> rows;
    for (const Tree& t : made)
      rows.push_back(t.leaves().at(k));
    stacked.push_back(stack(rows, where));
  }
  if (leaves > 0) {
    Tree all = state->variables.contains("params") ? state->variables["params"] : Tree();
    put(all, s.path(), made.front().with_leaves(stacked));
    state->variables.set("params", std::move(all));
  }
  state->rng_counters = std::move(counters_after);
  return x;
}

Array apply_layers(Scope& s, const std::string& where, std::int64_t length, const ScanLayer& layer,
                   const Array& carry) {
  const std::shared_ptr<ScopeState>& state = state_of(s);
  const Tree* found =
      state->variables.contains("params") ? state->variables["params"].find(s.path()) : nullptr;
  const Tree stacked = found != nullptr ? *found : Tree();
  const std::vector<std::pair<std::string, Array>> flat = stacked.flatten();
  std::vector<Array> xs;
  for (const auto& [path, leaf] : flat) {
    if (leaf.rank() == 0 || leaf.shape()[0] != length)
      throw ValueError(detail::str("apply: parameter params/", s.path_str(), "/", path, " is ",
                                   leaf.aval(), ", but ", where, " scans ", length,
                                   " layers and expects it stacked along a leading axis of ",
                                   length, "; are the variables from another model?"));
    xs.push_back(leaf);
  }
  auto counters = state->rng_counters;
  decltype(state->rng_counters) counters_after = counters;
  std::set<std::string> used;
  const ScanBody body = [&](std::span<const Array> c, std::span<const Array> rows) {
    auto layer_state = std::make_shared<ScopeState>(*state);
    Tree params =
        layer_state->variables.contains("params") ? layer_state->variables["params"] : Tree();
    if (!flat.empty()) put(params, s.path(), stacked.with_leaves(rows));
    layer_state->variables.set("params", std::move(params));
    layer_state->rng_counters = counters;
    layer_state->used_params.clear();
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
  state->rng_counters = std::move(counters_after);
  state->used_params.insert(used.begin(), used.end());
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
