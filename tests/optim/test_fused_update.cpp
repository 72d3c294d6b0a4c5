// Fused optimiser updates: every transformation is per-leaf code, and a chain of them plus
// apply_updates runs as one fused_elementwise per dtype. Its results must be the bits of
// optax's formulas applied one primitive at a time (written out eagerly here), clipping
// included anywhere in a chain; custom transformations still chain.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <memory>
#include <tuple>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/ir/graph.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/transforms/trace.hpp"
#include "harness/tree_bits.hpp"

using namespace flaxpp;
namespace o = flaxpp::optim;
using testing::check_same_bits;

namespace {

template <class T>
Array ramp(const Shape& shape, double base, double step) {
  std::vector<T> v(static_cast<std::size_t>(shape.size()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<T>(base + step * static_cast<double>(i) - 0.3 * double(i * i % 5));
  return Array::from_vector(v, shape);
}

Tree params_tree() {
  return Tree{{"a", ramp<float>(Shape{3, 4}, 0.5, 0.11)}, {"b", ramp<float>(Shape{5}, -1.0, 0.4)}};
}
Tree grads_tree(int step) {
  return Tree{{"a", ramp<float>(Shape{3, 4}, -0.7 + step, 0.23)},
              {"b", ramp<float>(Shape{5}, 0.2 * step, -0.31)}};
}

// optax 0.2.8's formulas, one primitive at a time.
double divisor(double decay, int count) {
  const float power =
      round_to_float32(std::pow(static_cast<double>(round_to_float32(decay)), double(count)));
  return static_cast<double>(1.0f - power);
}
struct EagerAdam {
  double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  bool nesterov = false;
  Tree mu, nu;
  int count = 0;
  Tree operator()(const Tree& g) {
    mu = tree_map(g, mu, [&](const Array& x, const Array& m) { return (1.0 - b1) * x + b1 * m; });
    nu = tree_map(
        g, nu, [&](const Array& x, const Array& n) { return (1.0 - b2) * power(x, 2) + b2 * n; });
    ++count;
    std::vector<Array> out;
    const auto gs = g.leaves(), ms = mu.leaves(), ns = nu.leaves();
    for (std::size_t i = 0; i < gs.size(); ++i) {
      const Array m_hat = nesterov ? b1 * (ms[i] / divisor(b1, count + 1)) +
                                         (1.0 - b1) * (gs[i] / divisor(b1, count))
                                   : ms[i] / divisor(b1, count);
      const Array n_hat = ns[i] / divisor(b2, count);
      out.push_back(m_hat / (sqrt(n_hat + 0.0) + eps));
    }
    return g.with_leaves(out);
  }
};
Tree eager_clip(const Tree& u, double max_norm) {
  const Array g_norm = o::global_norm(u);
  const Array trigger = lax::lt(g_norm, lax::scalar(max_norm, g_norm.dtype()));
  return tree_map(u, [&](const Array& t) {
    return lax::select(broadcast_to(trigger, t.shape()), t, (t / g_norm) * max_norm);
  });
}
Tree eager_scale(const Tree& u, double s) {
  return tree_map(u, [&](const Array& t) { return t * s; });
}

// The fused_elementwise equations of apply_gradients(tx, grads, state, params) when traced.
std::int64_t fused_passes(const o::GradientTransformation& tx, const Tree& params) {
  const Tree state = tx.init(params);
  const std::size_t n = params.leaves().size();
  std::vector<AVal> avals;
  for (int k = 0; k < 2; ++k)
    for (const Array& leaf : params.leaves())
      avals.push_back(leaf.aval());
  const ir::Graph graph = make_graph(
      [&](std::span<const Array> in) {
        const Tree p = params.with_leaves(in.subspan(0, n));
        const Tree g = params.with_leaves(in.subspan(n, n));
        return o::apply_gradients(tx, g, state, p).first.leaves();
      },
      avals);
  return ir::count_eqns(graph, lax::fused_elementwise_p);
}

}  // namespace

TEST_CASE("fused update: clip then nesterov Adam gives optax's formulas' bits, state included") {
  const o::GradientTransformation tx =
      o::chain({o::clip_by_global_norm(2.0), o::adam(0.01, {.nesterov = true})});
  Tree params = params_tree();
  Tree state = tx.init(params);
  Tree want = params;
  EagerAdam adam{.nesterov = true, .mu = state["1"]["0"]["mu"], .nu = state["1"]["0"]["nu"]};
  for (int step = 0; step < 3; ++step) {
    const Tree g = grads_tree(step);
    std::tie(params, state) = o::apply_gradients(tx, g, state, params);
    want = o::apply_updates(want, eager_scale(adam(eager_clip(g, 2.0)), -0.01));
    check_same_bits(params, want);
    check_same_bits(state["1"]["0"]["mu"], adam.mu);
    check_same_bits(state["1"]["0"]["nu"], adam.nu);
    CHECK(state["1"]["0"]["count"].array().to_vector<std::int32_t>()[0] == step + 1);
  }
}

TEST_CASE("fused update: clipping in the middle of a chain runs the code before it first") {
  const o::GradientTransformation tx =
      o::chain({o::scale_by_adam(), o::clip_by_global_norm(0.5), o::scale(-0.1)});
  Tree params = params_tree();
  Tree state = tx.init(params);
  EagerAdam adam{.mu = state["0"]["mu"], .nu = state["0"]["nu"]};
  Tree want = params;
  for (int step = 0; step < 2; ++step) {
    const Tree g = grads_tree(step);
    Tree updates;
    std::tie(updates, state) = tx.update(g, state, params);
    check_same_bits(updates, eager_scale(eager_clip(adam(g), 0.5), -0.1));
  }
  CHECK(fused_passes(tx, params) == 2);
}

TEST_CASE("fused update: one pass per dtype for a whole optimiser and apply_updates") {
  const Tree params = params_tree();
  CHECK(fused_passes(o::adamw(0.01), params) == 1);
  CHECK(fused_passes(o::rmsprop(0.01, {.centered = true, .momentum = 0.9, .nesterov = true, .bias_correction = true}), params) == 1);
  CHECK(fused_passes(o::chain({o::clip_by_global_norm(1.0), o::sgd(0.1, 0.9)}), params) == 1);
  Tree mixed = params;
  mixed.set("c", Array::from_vector(std::vector<double>{1.0, 2.0}, Shape{2}));
  CHECK(fused_passes(o::adam(0.01), mixed) == 2);
}

TEST_CASE("fused update: apply_gradients is update then apply_updates, for every optimiser") {
  const std::vector<o::GradientTransformation> all = {
      o::sgd(0.1),
      o::sgd(0.1, 0.9, true),
      o::adam(o::cosine_decay_schedule(0.01, 10)),
      o::adamw(0.01, {.b2 = 0.99, .eps = 1e-6, .eps_root = 1e-9, .weight_decay = 0.1}),
      o::rmsprop(0.01),
      o::rmsprop(0.01, {.initial_scale = 0.1, .eps_in_sqrt = false, .centered = true, .momentum = 0.9, .nesterov = true, .bias_correction = true}),
      o::chain({o::clip_by_global_norm(0.1), o::adam(0.001)})};
  for (std::size_t k = 0; k < all.size(); ++k) {
    CAPTURE(k);
    const o::GradientTransformation& tx = all[k];
    Tree p1 = params_tree(), p2 = p1, s1 = tx.init(p1), s2 = s1;
    for (int step = 0; step < 3; ++step) {
      const Tree g = grads_tree(step);
      std::tie(p1, s1) = o::apply_gradients(tx, g, s1, p1);
      Tree u;
      std::tie(u, s2) = tx.update(g, s2, p2);
      p2 = o::apply_updates(p2, u);
    }
    check_same_bits(p1, p2);
  }
}

TEST_CASE("fused update: a custom transformation chains with the built-in ones") {
  // Doubles the updates, in plain operations: it has no emitter, so its chain has none either.
  const o::GradientTransformation twice{
      [](const Tree&) { return Tree(); },
      [](const Tree& u, const Tree& s, const Tree&) {
        return std::pair{tree_map(u, [](const Array& x) { return x * 2.0; }), s};
      }};
  const o::GradientTransformation tx = o::chain({twice, o::sgd(0.5)});
  CHECK_FALSE(tx.emit);
  const Tree params = params_tree(), g = grads_tree(1);
  const auto [new_params, state] = o::apply_gradients(tx, g, tx.init(params), params);
  check_same_bits(new_params, o::apply_updates(params, eager_scale(eager_scale(g, 2.0), -0.5)));
}

TEST_CASE("fused update: mismatched trees and missing params are clear errors") {
  const Tree params = params_tree();
  const o::GradientTransformation tx = o::adamw(0.01);
  const Tree state = tx.init(params);
  const Tree other{{"a", params["a"].array()}};
  CHECK_THROWS_WITH_AS(o::apply_gradients(tx, other, state, params),
                       doctest::Contains("updates of the params' structure"), ValueError);
  CHECK_THROWS_WITH_AS(tx.update(grads_tree(0), state, Tree()),
                       doctest::Contains("reads the parameters"), ValueError);
  const o::GradientTransformation adam = o::adam(0.01);
  CHECK_THROWS_WITH_AS(adam.update(grads_tree(0), adam.init(other), params),
                       doctest::Contains("state tree must have the params' structure"), ValueError);
}

TEST_CASE(
    "fused update: what the caller moves in is updated in place; copies it keeps are never "
    "written") {
  const o::GradientTransformation tx = o::adam(0.01);
  // Kept by the caller: new buffers, the kept values untouched.
  const Tree params = params_tree(), state = tx.init(params), grads = grads_tree(0);
  const auto [p1, s1] = o::apply_gradients(tx, grads, state, params);
  check_same_bits(params, params_tree());
  check_same_bits(grads, grads_tree(0));
  check_same_bits(state["0"]["mu"], tx.init(params)["0"]["mu"]);

  // Moved in and held nowhere else: the new parameters and moments take the buffers of the
  // gradients, parameters and moments, so the update allocates nothing of their size.
  const auto large = [](double start) {
    return Tree{{"a", ramp<float>(Shape{8, 8}, start, 0.11)},
                {"b", ramp<float>(Shape{48}, -start, 0.4)}};
  };
  const Tree kept_p = large(0.5), kept_g = large(-0.7);
  const auto [p1_large, s1_large] = o::apply_gradients(tx, kept_g, tx.init(kept_p), kept_p);
  Tree p = large(0.5), s = tx.init(p), g = large(-0.7);
  Backend& be = backend(default_device());
  be.synchronize();
  const MemoryStats before = be.memory_stats();
  be.reset_peak_memory();
  const std::int64_t param_bytes = 4 * (64 + 48);
  const auto [p2, s2] = o::apply_gradients(tx, std::move(g), std::move(s), std::move(p));
  be.synchronize();
  // Only 0-d values (Adam's count and bias corrections) are new; a copy of the smallest
  // parameter leaf would be 192 bytes.
  CHECK(be.memory_stats().peak_bytes - before.live_bytes < 64);
  CHECK(be.memory_stats().live_bytes - before.live_bytes <= 4 - param_bytes);  // grads freed
  check_same_bits(p2, p1_large);
  check_same_bits(s2["0"]["mu"], s1_large["0"]["mu"]);
  check_same_bits(s2["0"]["nu"], s1_large["0"]["nu"]);
}

namespace {

// Each leaf's buffer address, by path.
std::map<std::string, const void*> addresses(const Tree& t) {
  std::map<std::string, const void*> out;
  for (const auto& [path, leaf] : t.flatten())
    out[path] = leaf.buffer().data();
  return out;
}

}  // namespace

TEST_CASE(
    "fused update: donated parameters and state keep their addresses (each new value takes the "
    "buffer of the value it replaces), as a replayed CUDA graph needs") {
  const std::vector<std::pair<const char*, o::GradientTransformation>> optimisers = {
      {"sgd momentum", o::sgd(0.1, 0.9)},
      {"adam", o::adam(o::cosine_decay_schedule(0.01, 10))},
      {"adamw", o::adamw(0.01)},
      {"rmsprop centered", o::rmsprop(0.01, {.eps_in_sqrt = false, .centered = true, .momentum = 0.5})},
  };
  for (const auto& entry : optimisers) {
    const char* name = entry.first;  // doctest's CAPTURE lambda cannot capture a binding
    const o::GradientTransformation& tx = entry.second;
    CAPTURE(name);
    Tree p = params_tree(), s = tx.init(p);
    for (int step = 0; step < 3; ++step) {
      const auto param_addresses = addresses(p), state_addresses = addresses(s);
      std::tie(p, s) = o::apply_gradients(tx, grads_tree(step), std::move(s), std::move(p));
      CHECK(addresses(p) == param_addresses);
      // optax's count is a new host scalar each step; every per-leaf state keeps its buffer.
      for (const auto& [path, address] : addresses(s))
        if (path.find("count") == std::string::npos) CHECK(address == state_addresses.at(path));
    }
  }
}

TEST_CASE("fused update: a custom emitter's value from before global_norm is a clear error") {
  // global_norm runs the code so far (the update was changed), so `before` belongs to a
  // program that has run.
  const o::GradientTransformation stale =
      o::from_emitter([](const Tree&) { return Tree(); },
                      [](o::UpdateBuilder& b, const Tree& s) {
                        const ir::EValue before = b.update() * 2.0;
                        b.set_update(before);
                        const ir::EValue norm = b.global_norm();
                        b.set_update(before / norm);
                        return o::StateFn([s](const o::UpdateResults&) { return s; });
                      });
  const Tree params = params_tree();
  CHECK_THROWS_WITH_AS(stale.update(grads_tree(0), Tree(), params),
                       doctest::Contains("value from another program"), ValueError);
}
