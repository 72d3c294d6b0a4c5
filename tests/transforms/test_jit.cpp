// jit: a train step of value_and_grad and an optax update traced once per signature and
// replayed with the eager step's bits (on a GPU, within rounding); retracing on a new batch
// shape; donation (the caller's arrays invalidated, the update written in place); calling a
// compiled step with another tree; the passes (CSE that leaves remat's recomputation alone,
// dead code dropped).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/core/precision.hpp"
#include "flaxpp/ir/elementwise_program.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/nn/dense.hpp"
#include "flaxpp/nn/dropout.hpp"
#include "flaxpp/nn/layer_norm.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/nn/remat.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/losses.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/trace.hpp"
#include "harness/cuda_parity.hpp"
#include "harness/finite_diff.hpp"
#include "harness/tree_bits.hpp"

using namespace flaxpp;
namespace cp = flaxpp::checkpoint_policies;

namespace {

const nn::MLP kMlp{.features = {16, 16, 10}};

Array batch_x(std::int64_t rows, unsigned seed) {
  return astype(testing::random_f64(Shape{rows, 8}, seed, -2.0, 2.0), DType::f32);
}
Array batch_y(std::int64_t rows) {
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<std::int32_t>(i * 3 % 10);
  return Array::from_vector(labels, Shape{rows});
}

// A jitted result against the eager one: bit for bit on the CPU. Elsewhere within 1e-5, as
// test_dot_bias.cpp allows: the jitted step's Dense products take their bias in cuBLASLt's
// epilogue (fuse_dot_bias), which may sum in another order than the eager step's cuBLAS GEMM
// and add (desk review 2 #6).
void check_matches_eager(const Tree& jitted, const Tree& eager) {
  if (default_device().kind == DeviceKind::cpu) {
    testing::check_same_bits(jitted, eager);
    return;
  }
  const auto j = jitted.flatten(), e = eager.flatten();
  REQUIRE(j.size() == e.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    CAPTURE(j[i].first);
    CHECK(j[i].first == e[i].first);
    REQUIRE(j[i].second.aval() == e[i].second.aval());
    testing::check_close(testing::values(j[i].second), testing::values(e[i].second), 1e-5);
  }
}

// One train step, JAX's whole step as one function: (params, opt_state, x, y) ->
// (new params, new opt_state, loss).
std::vector<Tree> train_step(const optim::GradientTransformation& tx, PolicyPtr policy,
                             std::span<const Tree> a) {
  auto loss_of = [&](const Tree& params) {
    const Array logits =
        remat<nn::MLP>(policy)(kMlp).apply(nn::Variables{{"params", params}}, a[2].array());
    return mean(optim::softmax_cross_entropy_with_integer_labels(logits, a[3].array()));
  };
  auto [loss, grads] = value_and_grad(loss_of)(a[0]);
  auto [params, state] = optim::apply_gradients(tx, std::move(grads), a[1], a[0]);
  return {params, state, Tree(loss)};
}

// `steps` steps of `step_fn` ((params, opt_state, x, y) -> (params, opt_state, loss)) from
// the same start, eagerly and jitted with parameters and state donated, on batches of 16 rows
// (seeds seed, seed + 1, ...): the losses are equal at every step, the final parameters and
// state bit for bit (check_matches_eager), and the step traced once. Returns the jitted final
// state.
Tree check_jit_matches_eager(const TreeFn& step_fn, const Tree& params, const Tree& opt_state,
                             int steps, unsigned seed) {
  Tree eager_params = params, eager_state = opt_state;
  Tree jit_params = params, jit_state = opt_state;
  const Jitted step = jit(step_fn, {.donate_argnums = {0, 1}});
  for (int i = 0; i < steps; ++i) {
    const Array x = batch_x(16, seed + static_cast<unsigned>(i)), y = batch_y(16);
    const std::vector<Tree> eager = step_fn(std::vector<Tree>{eager_params, eager_state, x, y});
    std::vector<Tree> jitted = step({std::move(jit_params), std::move(jit_state), x, y});
    check_matches_eager(jitted[2], eager[2]);
    eager_params = eager[0];
    eager_state = eager[1];
    jit_params = std::move(jitted[0]);
    jit_state = std::move(jitted[1]);
  }
  check_matches_eager(jit_params, eager_params);
  check_matches_eager(jit_state, eager_state);
  CHECK(step.num_traces() == 1);
  return jit_state;
}

}  // namespace

TEST_CASE("jit: a jitted train step gives the eager step's bits, traced once per signature") {
  // SGD with momentum (every optimiser, chain and schedule: the next test).
  const optim::GradientTransformation tx = optim::sgd(0.05, 0.9);
  for (const PolicyPtr& policy : {cp::none(), PolicyPtr{cp::nothing_saveable()}}) {
    CAPTURE(policy->str());
    const Tree init = nn::Model(kMlp).init(random::key(1), batch_x(4, 1))["params"];
    Tree eager_params = init, eager_state = tx.init(init);
    Tree jit_params = init, jit_state = tx.init(init);
    const Jitted step = jit([&](std::span<const Tree> a) { return train_step(tx, policy, a); });
    for (int i = 0; i < 4; ++i) {
      const Array x = batch_x(32, 10 + i), y = batch_y(32);
      const std::vector<Tree> eager = train_step(tx, policy, std::vector<Tree>{eager_params, eager_state, x, y});
      const std::vector<Tree> jitted = step({jit_params, jit_state, x, y});
      check_matches_eager(jitted[2], eager[2]);
      eager_params = eager[0];
      eager_state = eager[1];
      jit_params = jitted[0];
      jit_state = jitted[1];
    }
    check_matches_eager(jit_params, eager_params);
    check_matches_eager(jit_state, eager_state);
    CHECK(step.num_traces() == 1);
    // A last, partial batch: a new signature, traced again.
    (void)step({jit_params, jit_state, batch_x(7, 20), batch_y(7)});
    CHECK(step.num_traces() == 2);
  }
}

TEST_CASE("jit: every optimiser, chain and schedule gives the eager step's bits") {
  // optax's count is traced like the rest of the state: schedules and bias corrections are
  // computed inside the step from the count it is given, and the step returns count + 1.
  namespace o = optim;
  const std::vector<std::pair<const char*, o::GradientTransformation>> optimisers = {
      {"sgd, linear schedule", o::sgd(o::linear_schedule(0.1, 0.01, 3))},
      {"sgd, nesterov momentum", o::sgd(0.05, 0.9, true)},
      {"adam", o::adam(0.01)},
      {"adam, nesterov", o::adam(0.01, {.nesterov = true})},
      {"adamw, warmup cosine decay",
       o::adamw(o::warmup_cosine_decay_schedule(0.0, 0.02, 2, 6, 0.001), {.weight_decay = 0.01})},
      {"rmsprop, centered, momentum, bias correction",
       o::rmsprop(o::cosine_decay_schedule(0.01, 4, 0.1, 2.0),
                  {.centered = true, .momentum = 0.9, .bias_correction = true})},
      {"clip_by_global_norm then adam, polynomial schedule",
       o::chain({o::clip_by_global_norm(0.5),
                 o::adam(o::polynomial_schedule(0.01, 0.001, 1.5, 4))})},
  };
  for (const auto& entry : optimisers) {
    // Named copies: clang 14's lambdas (CAPTURE's too) cannot capture a structured binding.
    const std::string name = entry.first;
    const o::GradientTransformation& tx = entry.second;
    CAPTURE(name);
    const Tree init = nn::Model(kMlp).init(random::key(2), batch_x(4, 1))["params"];
    const Tree jit_state = check_jit_matches_eager(
        [&](std::span<const Tree> a) { return train_step(tx, cp::none(), a); }, init, tx.init(init),
        5, 30);
    for (const auto& [path, leaf] : jit_state.flatten())
      if (path.ends_with("count")) CHECK(leaf.to_vector<std::int32_t>() == std::vector{5});
  }
}

TEST_CASE("jit: memory_analysis predicts the measured peak; on the CPU a leaf's update runs as "
          "soon as its gradient is final") {
  if (default_device() != Device::cpu()) return;  // CUDA's pool and graphs: tests/cuda
  const nn::MLP mlp{.features = {256, 256, 256, 10}};
  const Array x = astype(testing::random_f64(Shape{16, 128}, 3, -1.0, 1.0), DType::f32);
  const Array y = batch_y(16);
  for (const PolicyPtr& policy : {cp::none(), PolicyPtr{cp::nothing_saveable()},
                                  PolicyPtr{cp::dots_with_no_batch_dims_saveable()}}) {
    CAPTURE(policy->str());
    const optim::GradientTransformation tx = optim::adam(1e-3);
    const auto step_fn = [&](std::span<const Tree> a) {
      const auto loss_of = [&](const Tree& params) {
        const nn::Variables v{{"params", params}};
        const Array logits = remat<nn::MLP>(policy)(mlp).apply(v, a[2].array());
        return mean(optim::softmax_cross_entropy_with_integer_labels(logits, a[3].array()));
      };
      auto [loss, grads] = value_and_grad(loss_of)(a[0]);
      auto [params, state] = optim::apply_gradients(tx, std::move(grads), a[1], a[0]);
      return std::vector<Tree>{params, state, Tree(loss)};
    };
    const Jitted step = jit(step_fn, {.donate_argnums = {0, 1}});
    Tree params = nn::Model(mlp).init(random::key(3), x)["params"];
    Tree state = tx.init(params);
    const CompiledStep compiled = step.lower(std::vector<Tree>{params, state, x, y});
    const MemoryAnalysis& m = compiled.memory_analysis();
    CAPTURE(m.str());
    CHECK(m.exact);
    std::int64_t param_bytes = 0;
    for (const Array& p : params.leaves())
      param_bytes += p.nbytes();
    // Parameters and both moments are written in place: only the loss and the count are new.
    CHECK(m.alias_bytes == 3 * param_bytes);
    CHECK(m.output_bytes == m.alias_bytes + 4 + 4);
    for (int i = 0; i < 2; ++i) {
      Backend& be = backend(Device::cpu());
      const std::int64_t before = be.memory_stats().live_bytes;
      be.reset_peak_memory();
      std::vector<Tree> out = compiled({std::move(params), std::move(state), x, y});
      // The arguments and constants were live before the call; the prediction counts them once.
      CHECK(be.memory_stats().peak_bytes - before == m.peak_bytes - m.resident_bytes());
      params = std::move(out[0]);
      state = std::move(out[1]);
    }
    // Without the passes that split the update by leaf and run each as early as it can, every
    // leaf's gradient would exist at once at the end of the backward pass (all the parameters'
    // bytes again). With them, at most the largest leaf's, beside a few activations of this
    // small batch.
    std::int64_t largest_leaf = 0;
    for (const Array& p : params.leaves())
      largest_leaf = std::max(largest_leaf, p.nbytes());
    const std::int64_t activations = 8 * 16 * 256 * 4;  // eight 16x256 float32 values
    CHECK(m.temp_bytes < largest_leaf + activations);
    CHECK(largest_leaf + activations < param_bytes);
    // One update per leaf: the optimiser's fused equations writing a new parameter and its
    // two moments, each in place of the old one (the fusion pass's programs replace nothing).
    std::int64_t updates = 0;
    for (const ir::Eqn& e : compiled.graph().eqns)
      updates +=
          e.prim == &lax::fused_elementwise_p && e.outputs.size() == 3 &&
          !e.params.get<std::shared_ptr<const ir::ElementwiseProgram>>("program")->aliases.empty();
    CHECK(updates == static_cast<std::int64_t>(params.leaves().size()));
  }
}

namespace {

// Dense -> LayerNorm -> relu -> Dropout -> Dense: LayerNorm's own primitives and dropout's
// random mask, which a remat'd backward pass must draw again with the same key.
struct NormedDropout {
  static constexpr const char* name = "NormedDropout";
  Array operator()(nn::Scope& s, Array x) const {
    x = relu(s(nn::LayerNorm{}, s(nn::Dense{.features = 16}, x)));
    return s(nn::Dense{.features = 10}, s(nn::Dropout{.rate = 0.3}, x));
  }
};

}  // namespace

TEST_CASE("jit: LayerNorm and dropout (its mask drawn again in the recomputation) keep the "
          "eager step's bits under every policy") {
  const optim::GradientTransformation tx = optim::adam(0.01);
  const nn::RngStreams rngs{{"dropout", random::key(11)}};
  for (const PolicyPtr& policy : {cp::none(), PolicyPtr{cp::nothing_saveable()},
                                  PolicyPtr{cp::dots_with_no_batch_dims_saveable()}}) {
    CAPTURE(policy->str());
    const auto step_fn = [&](std::span<const Tree> a) {
      auto [loss, grads] = value_and_grad([&](const Tree& p) {
        const nn::Variables v{{"params", p}};
        const Array logits =
            remat<NormedDropout>(policy)(NormedDropout{}).apply_with_rngs(v, rngs, a[2].array());
        return mean(optim::softmax_cross_entropy_with_integer_labels(logits, a[3].array()));
      })(a[0]);
      auto [params, state] = optim::apply_gradients(tx, std::move(grads), a[1], a[0]);
      return std::vector<Tree>{params, state, Tree(loss)};
    };
    const Tree init = nn::Model(NormedDropout{}).init(random::key(5), batch_x(4, 1))["params"];
    (void)check_jit_matches_eager(step_fn, init, tx.init(init), 3, 50);
  }
}

TEST_CASE("jit, typed: a function of Trees and Arrays is called with them, one trace per "
          "signature, donation included") {
  const Tree params = nn::Model(kMlp).init(random::key(4), batch_x(4, 1))["params"];
  const auto predict = jit([](const Tree& p, const Array& x) {
    return nn::Model(kMlp).apply(nn::Variables{{"params", p}}, x);
  });
  const Array x = batch_x(8, 61);
  const Array y = predict(params, x);
  check_matches_eager(Tree(y),
                      Tree(nn::Model(kMlp).apply(nn::Variables{{"params", params}}, x)));
  (void)predict(params, batch_x(8, 62));
  CHECK(predict.num_traces() == 1);
  (void)predict(params, batch_x(3, 63));  // a new batch size: traced again
  CHECK(predict.num_traces() == 2);
  // A Tree result, and a donated Array argument.
  const auto halves = jit([](const Array& v) { return Tree{{"a", v * 0.5}, {"b", v + 1.0}}; });
  const Tree h = halves(Array::full(Shape{2}, 4.0, DType::f32));
  CHECK(h["a"].array().to_vector<float>() == std::vector<float>{2.0f, 2.0f});
  CHECK(h["b"].array().to_vector<float>() == std::vector<float>{5.0f, 5.0f});
  const auto sgd = jit([](const Array& w, const Array& g) { return w - 0.5 * g; },
                       {.donate_argnums = {0}});
  const Array w = Array::full(Shape{3}, 1.0, DType::f32), g = Array::full(Shape{3}, 2.0, DType::f32);
  CHECK(sgd(w, g).to_vector<float>() == std::vector<float>{0.0f, 0.0f, 0.0f});
  CHECK(w.donated());
  CHECK_THROWS_WITH_AS((void)w.to_vector<float>(), doctest::Contains("donated"), ValueError);
  CHECK(g.to_vector<float>() == std::vector<float>{2.0f, 2.0f, 2.0f});
}

TEST_CASE("jit: donated arguments give their buffers to the step; reading them is an error") {
  const optim::GradientTransformation tx = optim::sgd(0.1);
  const Tree init = nn::Model(kMlp).init(random::key(2), batch_x(4, 1))["params"];
  const Jitted step = jit([&](std::span<const Tree> a) { return train_step(tx, cp::none(), a); },
                          {.donate_argnums = {0, 1}});
  Tree params = init, state = tx.init(init);
  (void)step({params, state, batch_x(16, 3), batch_y(16)});  // the first call traces
  // The caller keeps `params` (an alias of init's leaves): they are invalidated by donation.
  CHECK_THROWS_WITH_AS(init["Dense_0"]["kernel"].array().to_vector<float>(),
                       doctest::Contains("donated to a jitted function"), ValueError);
  // The update is written where the donated parameters were (each is read for the last time
  // by its own update).
  Tree fresh = nn::Model(kMlp).init(random::key(2), batch_x(4, 1))["params"];
  Tree fresh_state = tx.init(fresh);
  std::vector<const void*> before;
  for (const Array& p : fresh.leaves())
    before.push_back(p.buffer().data());
  const std::vector<Tree> out =
      step({std::move(fresh), std::move(fresh_state), batch_x(16, 4), batch_y(16)});
  std::vector<const void*> after;
  for (const Array& p : out[0].leaves())
    after.push_back(p.buffer().data());
  CHECK(after == before);
}

TEST_CASE("jit: a donated buffer that reaches the call twice is copied, never destroyed") {
  // f(a, b) = (a * 2 + b, sum(b)), argument 0 donated. Each call below passes a buffer twice;
  // the results are the eager ones and the caller's arrays stay readable.
  const TreeFn f = [](std::span<const Tree> a) {
    Tree doubled = tree_map(a[0], [](const Array& x) { return x * Array::scalar(2.0f); });
    const Array b = a[1].is_leaf() ? a[1].array() : a[1].leaves()[0];
    doubled = tree_map(doubled, [&](const Array& x) { return x + b; });
    return std::vector<Tree>{doubled, Tree(sum(b))};
  };
  const Jitted step = jit(f, {.donate_argnums = {0}});
  const auto values = [](const Tree& t) {
    std::vector<float> out;
    for (const Array& x : t.leaves())
      for (const float v : x.to_vector<float>())
        out.push_back(v);
    return out;
  };
  const Array w = Array::from_vector(std::vector<float>{1, 2, 3}, Shape{3});
  SUBCASE("the same array donated and not donated") {
    const std::vector<Tree> got = step({Tree(w), Tree(w)});
    CHECK(values(got[0]) == std::vector<float>{3, 6, 9});
    CHECK(w.to_vector<float>() == std::vector<float>{1, 2, 3});
  }
  SUBCASE("two leaves of a donated tree sharing a buffer (tied weights)") {
    const Tree tied{{"a", w}, {"b", w}};
    const std::vector<Tree> got = step({tied, Tree(Array::full(Shape{3}, 1.0, DType::f32))});
    CHECK(values(got[0]) == std::vector<float>{3, 5, 7, 3, 5, 7});
    CHECK(w.to_vector<float>() == std::vector<float>{1, 2, 3});
  }
  SUBCASE("params and a copy made by assignment, both donated") {
    const Jitted both = jit(f, {.donate_argnums = {0, 1}});
    const Tree params{{"w", w}};
    const Tree copy = params;  // shares the buffers
    const std::vector<Tree> got = both({params, copy});
    CHECK(values(got[0]) == std::vector<float>{3, 6, 9});
    CHECK(w.to_vector<float>() == std::vector<float>{1, 2, 3});
  }
}

TEST_CASE("jit: a donated argument the function also captures is refused when traced") {
  const Array w = Array::from_vector(std::vector<float>{1, 2}, Shape{2});
  const Jitted step = jit(
      [&](std::span<const Tree> a) { return std::vector<Tree>{Tree(a[0].array() + w)}; },
      {.donate_argnums = {0}});
  CHECK_THROWS_WITH_AS(step({Tree(w)}),
                       doctest::Contains("argument 0 (f32[2]) is donated (donate_argnums) but the "
                                         "function also captures it as a constant"),
                       ValueError);
  CHECK(w.to_vector<float>() == std::vector<float>{1, 2});
}

TEST_CASE("jit: a compiled step called with another tree names the path that differs") {
  const Jitted f = jit([](std::span<const Tree> a) {
    return std::vector<Tree>{Tree(a[0]["w"].array() * 2.0 + a[0]["b"].array())};
  });
  const Tree args{{"w", Array::full(Shape{3}, 1.0, DType::f32)},
                  {"b", Array::full(Shape{3}, 0.5, DType::f32)}};
  const CompiledStep step = f.lower(std::vector<Tree>{args});
  CHECK(step(std::vector<Tree>{args})[0].array().to_vector<float>() ==
        std::vector<float>{2.5f, 2.5f, 2.5f});
  const Tree wrong_shape{{"w", Array::full(Shape{4}, 1.0, DType::f32)},
                         {"b", Array::full(Shape{4}, 0.5, DType::f32)}};
  const std::string device = detail::str(default_device());
  const std::string expected =
      detail::str("argument 0 unlike the one it was traced for, at b: expected f32[3] on ", device,
                  ", got f32[4] on ", device);
  CHECK_THROWS_WITH_AS(step(std::vector<Tree>{wrong_shape}), doctest::Contains(expected.c_str()),
                       ValueError);
  const Tree wrong_keys{{"w", Array::full(Shape{3}, 1.0, DType::f32)}};
  CHECK_THROWS_WITH_AS(step(std::vector<Tree>{wrong_keys}),
                       doctest::Contains("expected keys [b, w], got [w]"), ValueError);
  const Tree wrong_dtype{{"w", Array::full(Shape{3}, 1.0, DType::f64)},
                         {"b", Array::full(Shape{3}, 0.5, DType::f32)}};
  CHECK_THROWS_WITH_AS(step(std::vector<Tree>{wrong_dtype}), doctest::Contains("at w:"),
                       ValueError);
  // The jitted function itself traces the new signature instead.
  CHECK(f(std::vector<Tree>{wrong_shape})[0].array().shape() == Shape{4});
  CHECK(f.num_traces() == 2);
}

namespace {

// Equations of `prim`, and instructions `op` inside fused programs.
std::int64_t count_with_fused(const ir::Graph& g, const ir::Primitive& prim,
                              ir::ElementwiseProgram::Op op) {
  std::int64_t n = ir::count_eqns(g, prim);
  for (const ir::Eqn& e : g.eqns)
    if (e.prim == &lax::fused_elementwise_p)
      for (const auto& in :
           e.params.get<std::shared_ptr<const ir::ElementwiseProgram>>("program")->code)
        n += in.op == op;
  return n;
}

}  // namespace

TEST_CASE("jit passes: elementwise chains fuse into one pass with the same bits") {
  // bias + relu, a comparison feeding a select, a loss-like chain with a 0-d operand and
  // zeros broadcast: one pass. The mask is also read after the product, so it stays a bool
  // equation of its own too; the chain after the product is a second pass reading it as a
  // mask operand.
  const auto f = [](std::span<const Tree> a) {
    const Array x = a[0].array(), b = a[1].array(), s = a[2].array();
    const Array h = x + b;
    const Array r = maximum(h, lax::full_like(h, 0.0));
    const Array mask = greater(h, lax::full_like(h, 0.0));
    const Array y = where(mask, r * s, exp(-r) / s);
    const Array z = matmul(y, transpose(y));  // not elementwise: ends the chain
    return std::vector<Tree>{Tree(y), Tree(z + 1.0), Tree(where(mask, z, -z))};
  };
  const std::vector<Tree> args{
      Tree(astype(testing::random_f64(Shape{6, 6}, 21, -2.0, 2.0), DType::f32)),
      Tree(astype(testing::random_f64(Shape{6, 6}, 22, -1.0, 1.0), DType::f32)),
      Tree(Array::full(Shape{}, 1.5, DType::f32))};
  const Jitted fused = jit(f), plain = jit(f, {.donate_argnums = {},
                                               .fuse_elementwise = false,
                                               .fuse_dot_bias = true,
                                               .overlap_collectives = true});
  const CompiledStep a = fused.lower(args), b = plain.lower(args);
  const ir::OpCounts na = ir::op_counts(a.graph()), nb = ir::op_counts(b.graph());
  CAPTURE(a.graph().str());
  CHECK(nb.executed == nb.unfused);
  CHECK(na.unfused == nb.executed);
  CHECK(na.executed < nb.executed);
  CHECK(ir::count_eqns(a.graph(), lax::fused_elementwise_p) == 2);
  CHECK(ir::count_eqns(a.graph(), lax::gt_p) == 1);  // the mask read after the product
  CHECK(ir::count_eqns(a.graph(), lax::select_n_p) == 0);
  CHECK(ir::count_eqns(a.graph(), lax::neg_p) == 0);
  CHECK(ir::count_eqns(a.graph(), lax::exp_p) == 0);
  const std::vector<Tree> ra = fused(args), rb = plain(args);
  for (std::size_t i = 0; i < ra.size(); ++i)
    CHECK(ra[i].array().to_vector<float>() == rb[i].array().to_vector<float>());
}

TEST_CASE("jit passes: tanh, logistic, sign, erf, sin, cos and pow fuse with the same bits") {
  // GELU (its tanh form and its exact erf form), a sigmoid gate, sign and the trigonometric
  // functions, and a float power, with their gradients: each runs inside fused programs,
  // which give the unfused step's bits.
  const auto f = [](std::span<const Tree> a) {
    const auto loss = [](const Tree& p) {
      const Array x = p["x"].array();
      // Each of sin and cos heads a chain of its own, so that both fuse whichever order the
      // compiler evaluates the operands in.
      const Array h = gelu(x) * sigmoid(x) + gelu(x, false) + sin(x * 2.0) * cos(x * 3.0) +
                      power(abs(x) + 1.0, lax::full_like(x, 1.5));
      return sum(h * lax::sign(x));
    };
    auto [value, grad] = value_and_grad(loss)(a[0]);
    return std::vector<Tree>{Tree(value), grad};
  };
  const std::vector<Tree> args{
      Tree{{"x", astype(testing::random_f64(Shape{5, 7}, 23, -3.0, 3.0), DType::f32)}}};
  const Jitted fused = jit(f), plain = jit(f, {.donate_argnums = {},
                                               .fuse_elementwise = false,
                                               .fuse_dot_bias = true,
                                               .overlap_collectives = true});
  const CompiledStep step = fused.lower(args);
  CAPTURE(step.graph().str());
  using Op = ir::ElementwiseProgram::Op;
  for (const std::pair<const ir::Primitive*, Op>& fusing :
       std::vector<std::pair<const ir::Primitive*, Op>>{{&lax::tanh_p, Op::tanh},
                                                        {&lax::logistic_p, Op::logistic},
                                                        {&lax::sign_p, Op::sign},
                                                        {&lax::erf_p, Op::erf},
                                                        {&lax::sin_p, Op::sin},
                                                        {&lax::cos_p, Op::cos},
                                                        {&lax::pow_p, Op::pow}}) {
    const ir::Primitive& prim = *fusing.first;
    CAPTURE(prim.name());
    CHECK(count_with_fused(step.graph(), prim, fusing.second) > ir::count_eqns(step.graph(), prim));
  }
  const ir::OpCounts n = ir::op_counts(step.graph());
  CHECK(n.executed * 3 < n.unfused);
  const std::vector<Tree> ra = fused(args), rb = plain(args);
  CHECK(ra[0].array().to_vector<float>() == rb[0].array().to_vector<float>());
  CHECK(ra[1]["x"].array().to_vector<float>() == rb[1]["x"].array().to_vector<float>());
}

TEST_CASE("jit passes: 16-bit chains fuse only for a backend that rounds each instruction") {
  // relu(x * 0.1 + y) in bfloat16: on a GPU one program whose constant is bfloat16's 0.1
  // (0.10009765625, as the literal holds it); the CPU keeps the primitives.
  const auto f = [](std::span<const Array> v) {
    return std::vector<Array>{maximum(v[0] * 0.1 + v[1], lax::full_like(v[1], 0.0))};
  };
  for (const DType dtype : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(dtype));
    const std::vector<AVal> avals{AVal{Shape{4, 8}, dtype}, AVal{Shape{4, 8}, dtype}};
    ir::Graph cpu = make_graph(f, avals), gpu = make_graph(f, avals);
    CHECK(ir::fuse_elementwise(cpu) == 0);
    CHECK(ir::fuse_elementwise(gpu, {.sixteen_bit = true}) == 1);
    gpu.verify();
    CAPTURE(gpu.str());
    CHECK(ir::count_eqns(gpu, lax::mul_p) == 0);
    for (const ir::Eqn& e : gpu.eqns)
      if (e.prim == &lax::fused_elementwise_p) {
        const auto& constants =
            e.params.get<std::shared_ptr<const ir::ElementwiseProgram>>("program")->constants;
        const double tenth = dtype == DType::bf16 ? 0.10009765625 : 0.0999755859375;
        CHECK(std::find(constants.begin(), constants.end(), tenth) != constants.end());
      }
  }
}

TEST_CASE("jit passes: an MLP step's relu backward reads the forward mask in a fused pass") {
  const Tree init = nn::Model(kMlp).init(random::key(1), batch_x(4, 1))["params"];
  const optim::GradientTransformation tx = optim::sgd(0.1);
  const Jitted step = jit([&](std::span<const Tree> a) { return train_step(tx, cp::none(), a); });
  const std::vector<Tree> args{init, tx.init(init), batch_x(16, 1), batch_y(16)};
  const CompiledStep s = step.lower(args);
  CAPTURE(s.graph().str());
  CHECK(ir::count_eqns(s.graph(), lax::select_n_p) == 0);
  int masked = 0;
  for (const ir::Eqn& e : s.graph().eqns)
    if (e.prim == &lax::fused_elementwise_p)
      masked +=
          !e.params.get<std::shared_ptr<const ir::ElementwiseProgram>>("program")->masks.empty();
  CHECK(masked >= 2);  // the two hidden layers' masks
}

TEST_CASE("jit passes: common subexpressions merge, dead code goes, remat still recomputes") {
  const Jitted f = jit([](std::span<const Tree> a) {
    const Array x = a[0].array();
    (void)tanh(x);  // dead
    return std::vector<Tree>{Tree(exp(x) + exp(x))};
  });
  const Array x = Array::full(Shape{4}, 0.5, DType::f32);
  const CompiledStep step = f.lower(std::vector<Tree>{Tree(x)});
  CHECK(count_with_fused(step.graph(), lax::exp_p, ir::ElementwiseProgram::Op::exp) == 1);
  CHECK(ir::count_eqns(step.graph(), lax::tanh_p) == 0);
  CHECK(step(std::vector<Tree>{Tree(x)})[0].array().to_vector<float>()[0] ==
        2.0f * std::exp(0.5f));
  // Under nothing_saveable the backward pass recomputes each layer's product: the forward
  // products and their recomputation stay distinct equations.
  const auto loss = [](std::span<const Tree> a) {
    const ArrayFn layer = checkpoint(
        [](std::span<const Array> v) { return std::vector<Array>{relu(matmul(v[0], v[1]))}; },
        cp::nothing_saveable());
    auto [value, g] = value_and_grad([&](const Array& w) {
      return sum(layer(std::vector<Array>{a[1].array(), w})[0]);
    })(a[0].array());
    return std::vector<Tree>{Tree(value), Tree(g)};
  };
  const std::vector<Tree> args{Tree(Array::full(Shape{3, 3}, 0.1, DType::f32)),
                               Tree(Array::full(Shape{2, 3}, 1.0, DType::f32))};
  const ir::Graph traced = make_graph(
      [&](std::span<const Array> v) {
        std::vector<Array> out;
        for (const Tree& t : loss(std::vector<Tree>{Tree(v[0]), Tree(v[1])}))
          out.push_back(t.array());
        return out;
      },
      std::vector<AVal>{args[0].array().aval(), args[1].array().aval()});
  const CompiledStep remat = jit(loss).lower(args);
  CHECK(ir::count_eqns(remat.graph(), lax::dot_general_p) ==
        ir::count_eqns(traced, lax::dot_general_p));
  CHECK(ir::count_eqns(remat.graph(), lax::dot_general_p) >= 3);
}

TEST_CASE("jit: the matmul precision is fixed when tracing, backward products included") {
  const auto loss = [](std::span<const Tree> a) {
    auto [value, g] = value_and_grad([&](const Array& w) {
      return sum(square(matmul(a[1].array(), w)));
    })(a[0].array());
    return std::vector<Tree>{Tree(value), Tree(g)};
  };
  const std::vector<Tree> args{Tree(Array::full(Shape{3, 2}, 0.5, DType::f32)),
                               Tree(Array::full(Shape{4, 3}, 1.0, DType::f32))};
  const Jitted f = jit(loss);
  const CompiledStep exact = f.lower(args);
  set_default_matmul_precision(MatmulPrecision::tensorfloat32);
  const CompiledStep fast = f.lower(args);  // a new signature: traced again
  set_default_matmul_precision(MatmulPrecision::float32);
  CHECK(f.num_traces() == 2);
  int tf32 = 0, products = 0;
  for (const ir::Eqn& e : fast.graph().eqns)
    if (e.prim == &lax::dot_general_p) {
      ++products;
      tf32 += lax::dot_precision(e.params) == MatmulPrecision::tensorfloat32;
    }
  CHECK(products == 2);  // the forward product and the kernel's gradient
  CHECK(tf32 == products);
  for (const ir::Eqn& e : exact.graph().eqns)
    if (e.prim == &lax::dot_general_p) CHECK(!e.params.has("precision"));
  // Running the TF32 step later, with the default back at float32, keeps its precision.
  CHECK(fast.signature().find("[tensorfloat32]") == 0);
}
