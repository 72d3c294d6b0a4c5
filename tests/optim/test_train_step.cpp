// The compiled classifier train step: the same parameters as value_and_grad followed by
// apply_gradients (leaf by leaf on the CPU, one fused pass otherwise), and the memory that
// donation and the leafwise update save: the gradients never all exist at once on the CPU.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/nn/dense.hpp"
#include "flaxpp/nn/dropout.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/nn/normalization.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/losses.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/train/train_state.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "harness/finite_diff.hpp"
#include "harness/tree_bits.hpp"
#include "src/tools/mlp_apply.hpp"

using namespace flaxpp;
namespace o = flaxpp::optim;
using testing::check_same_bits;

namespace {

struct Batch {
  Array x, y;
};
Batch batch(std::int64_t rows, std::int64_t dim, unsigned seed) {
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<std::int32_t>((i * 7 + seed) % 10);
  return {astype(testing::random_f64(Shape{rows, dim}, seed), DType::f32),
          Array::from_vector(labels, Shape{rows})};
}

// An MLP with a BatchNorm after its first layer.
struct BnMlp {
  static constexpr const char* name = "BnMlp";
  Array operator()(nn::Scope& s, const Array& x, bool train) const {
    const Array h = relu(s(nn::BatchNorm{.use_running_average = !train, .momentum = 0.8},
                           s(nn::Dense{.features = 16}, x)));
    return s(nn::Dense{.features = 10}, h);
  }
};

// An MLP dropping half its hidden units while training.
struct DropoutMlp {
  static constexpr const char* name = "DropoutMlp";
  Array operator()(nn::Scope& s, const Array& x, bool train) const {
    const Array h = relu(s(nn::Dense{.features = 16}, x));
    return s(nn::Dense{.features = 10}, s(nn::Dropout{.rate = 0.5, .deterministic = !train}, h));
  }
};

}  // namespace

TEST_CASE("train step: the parameters of value_and_grad then apply_gradients, bit for bit") {
  const nn::MLP mlp{.features = {16, 16, 10}};
  const Batch b = batch(12, 8, 1);
  const Tree init = nn::Model(mlp).init(random::key(0), b.x)["params"];
  // Leafwise-capable optimisers, and one that needs every gradient at once (clipping).
  for (const o::GradientTransformation& tx :
       {o::adam(0.01), o::sgd(0.1, 0.9, true),
        o::chain({o::clip_by_global_norm(0.5), o::adamw(0.01)})}) {
    train::ClassifierStep step(train::mlp_apply(mlp, checkpoint_policies::none()), tx);
    train::TrainState state = step.init(init);
    Tree params = init, opt_state = tx.init(init);
    for (int i = 0; i < 3; ++i) {
      const float loss = step(state, b.x, b.y);
      const Tree args[] = {params};
      const int argnums[] = {0};
      const ValueAndGrad vg = value_and_grad(
          [&](std::span<const Tree> a) {
            return mean(o::softmax_cross_entropy_with_integer_labels(
                nn::Model(mlp).apply(nn::Variables{{"params", a[0]}}, b.x), b.y));
          },
          args, argnums);
      CHECK(loss == vg.value.to_vector<float>()[0]);
      std::tie(params, opt_state) = o::apply_gradients(tx, vg.grads[0], opt_state, params);
      check_same_bits(state.params, params);
    }
    CHECK(state.step == 3);
  }
}

TEST_CASE(
    "train step: donation and the memory plan keep the step's extra memory below one set of "
    "gradients, as memory_analysis predicts") {
  // Three 256 x 256 layers (768 KiB of kernels) and a batch of 4, so that parameters and
  // gradients dominate the step's memory.
  const nn::MLP mlp{.features = {256, 256, 256}};
  const Batch b = batch(4, 256, 2);
  train::ClassifierStep step(train::mlp_apply(mlp, checkpoint_policies::none()), o::sgd(0.01));
  // The eager step's memory: a step replayed from a CUDA graph keeps its gradients and batch
  // between steps (tests/cuda/test_cuda_graph.cpp checks its peak).
  step.set_graphs(false);
  train::TrainState state = step.init(nn::Model(mlp).init(random::key(0), b.x)["params"]);
  std::int64_t param_bytes = 0;
  for (const Array& p : state.params.leaves())
    param_bytes += p.nbytes();
  (void)step(state, b.x, b.y);  // traces; afterwards the state holds the only references
  Backend& be = backend(state.params.leaves().front().device());
  be.synchronize();
  const std::int64_t live = be.memory_stats().live_bytes;
  be.reset_peak_memory();
  (void)step(state, b.x, b.y);
  be.synchronize();
  const std::int64_t extra = be.memory_stats().peak_bytes - live;
  CAPTURE(extra);

  CAPTURE(param_bytes);
  // Without donation the update alone would add a second set of parameters; without an update
  // per leaf scheduled when its gradient is final the backward pass would end holding every
  // gradient.
  if (state.params.leaves().front().device().kind == DeviceKind::cpu) {
    CHECK(extra < param_bytes / 2);
    const MemoryAnalysis m = step.lower(state, b.x, b.y).memory_analysis();
    CHECK(extra == m.peak_bytes - m.resident_bytes());
  } else {
    CHECK(extra < param_bytes * 3 / 2);  // every gradient, updated in place in one pass
  }
  CHECK(be.memory_stats().live_bytes <= live);  // nothing left behind
}

TEST_CASE("train step: evaluate in batches gives the one-pass metrics with one batch's memory") {
  // 103 rows in batches of 10 (the last of 3 rows): the same loss and accuracy to float32
  // rounding, and a peak that holds one batch's activations, not the data set's.
  const nn::MLP mlp{.features = {512, 10}};
  const Batch b = batch(103, 64, 5);
  train::ClassifierStep step(train::mlp_apply(mlp, checkpoint_policies::none()), o::sgd(0.01));
  const Tree params = nn::Model(mlp).init(random::key(1), b.x)["params"];
  Backend& be = backend(params.leaves().front().device());
  be.synchronize();
  const std::int64_t live = be.memory_stats().live_bytes;
  be.reset_peak_memory();
  const auto [loss, accuracy] = step.evaluate(params, b.x, b.y);
  be.synchronize();
  const std::int64_t whole = be.memory_stats().peak_bytes - live;
  be.reset_peak_memory();
  const auto [batched_loss, batched_accuracy] = step.evaluate(params, b.x, b.y, 10);
  be.synchronize();
  const std::int64_t batched = be.memory_stats().peak_bytes - live;
  CHECK(batched_loss == doctest::Approx(loss).epsilon(1e-6));
  CHECK(batched_accuracy == doctest::Approx(accuracy).epsilon(1e-6));
  CAPTURE(whole);
  CAPTURE(batched);
  // The hidden layer's activations: 103 x 512 floats at once, against 10 x 512.
  CHECK(whole >= 103 * 512 * 4);
  CHECK(batched < whole / 4);
}

TEST_CASE("train step: evaluate over batches gathered on demand gives the batched metrics") {
  // The rows a batch at a time from a callback (as flaxpp train reads a text from its file):
  // the same bits as the batched evaluation of the whole arrays, asked for in order.
  const nn::MLP mlp{.features = {32, 10}};
  const Batch b = batch(103, 16, 7);
  train::ClassifierStep step(train::mlp_apply(mlp, checkpoint_policies::none()), o::sgd(0.01));
  const Tree params = nn::Model(mlp).init(random::key(2), b.x)["params"];
  const std::vector<float> x = b.x.to_vector<float>();
  const std::vector<std::int32_t> y = b.y.to_vector<std::int32_t>();
  std::vector<std::pair<std::int64_t, std::int64_t>> asked;
  const auto [loss, accuracy] =
      step.evaluate(params, 103, 10, [&](std::int64_t begin, std::int64_t end) {
        asked.emplace_back(begin, end);
        const auto rows = static_cast<std::size_t>(end - begin);
        return std::pair{
            Array::from_vector(std::vector<float>(x.begin() + begin * 16, x.begin() + end * 16),
                               Shape{end - begin, 16}, b.x.device()),
            Array::from_vector(std::vector<std::int32_t>(y.begin() + begin, y.begin() + end),
                               Shape{static_cast<std::int64_t>(rows)}, b.y.device())};
      });
  const auto [expected_loss, expected_accuracy] = step.evaluate(params, b.x, b.y, 10);
  CHECK(loss == expected_loss);
  CHECK(accuracy == expected_accuracy);
  CHECK(asked.size() == 11);
  CHECK(asked.front() == std::pair<std::int64_t, std::int64_t>{0, 10});
  CHECK(asked.back() == std::pair<std::int64_t, std::int64_t>{100, 103});
  CHECK_THROWS_WITH_AS(
      step.evaluate(params, 103, 0,
                    [](std::int64_t, std::int64_t) { return std::pair<Array, Array>{}; }),
      doctest::Contains("batch_rows must be >= 1"), ValueError);
}

TEST_CASE(
    "train step with batch statistics: the loss's aux, bit for bit, kept in the state and "
    "its checkpoint tree") {
  const nn::Model model(BnMlp{});
  const Batch b = batch(12, 8, 2);
  const nn::Variables v = model.init(random::key(0), b.x, false);
  const train::StatefulApplyFn apply = [&](const Tree& p, const Tree& stats, const Array& x,
                                           const train::ApplyMode& mode) {
    auto [logits, updates] = model.apply_mutable(
        nn::Variables{{"params", p}, {"batch_stats", stats}}, {"batch_stats"}, x, mode.train);
    return std::pair<Array, Tree>{logits, updates["batch_stats"]};
  };
  const o::GradientTransformation tx = o::sgd(0.1, 0.9);
  train::ClassifierStep step(apply, tx);
  train::TrainState state = step.init(v["params"], v["batch_stats"]);
  Tree params = v["params"], stats = v["batch_stats"], opt_state = tx.init(params);
  for (int i = 0; i < 3; ++i) {
    const float loss = step(state, b.x, b.y);
    // The same step by hand: value_and_grad with the statistics as aux (has_aux).
    const Tree args[] = {params};
    const int argnums[] = {0};
    const ValueAuxAndGrad r = value_and_grad_with_aux(
        [&](std::span<const Tree> a) {
          auto [logits, updated] = apply(a[0], stats, b.x, {.train = true});
          return std::pair<Array, Tree>{
              mean(o::softmax_cross_entropy_with_integer_labels(logits, b.y)), updated};
        },
        args, argnums);
    CHECK(loss == r.value.to_vector<float>()[0]);
    std::tie(params, opt_state) = o::apply_gradients(tx, r.grads[0], opt_state, params);
    stats = r.aux;
    check_same_bits(state.params, params);
    check_same_bits(state.batch_stats, stats);
  }
  // The checkpoint layout holds the statistics and gives them back.
  const Tree saved = state.to_tree();
  CHECK(saved.contains("batch_stats"));
  check_same_bits(train::TrainState::from_tree(saved).batch_stats, state.batch_stats);
  CHECK_FALSE(step.init(params).to_tree().contains("batch_stats"));
  // Evaluation runs on the running averages.
  const auto [eval_loss, accuracy] = step.evaluate(state, b.x, b.y);
  const Array logits = apply(state.params, state.batch_stats, b.x, {}).first;
  CHECK(eval_loss == mean(o::softmax_cross_entropy_with_integer_labels(logits, b.y)).item<float>());
  CHECK(accuracy >= 0.0f);
}

TEST_CASE(
    "train step with dropout: step i drops with fold_in(key, i), drawn inside the one trace, "
    "as the host draws it") {
  const nn::Model model(DropoutMlp{});
  const Batch b = batch(12, 8, 3);
  const Tree init = model.init(random::key(0), b.x, false)["params"];
  const train::StatefulApplyFn apply = [&](const Tree& p, const Tree& stats, const Array& x,
                                           const train::ApplyMode& mode) {
    return std::pair<Array, Tree>{
        model.apply_with_rngs(nn::Variables{{"params", p}}, mode.rngs, x, mode.train), stats};
  };
  const o::GradientTransformation tx = o::sgd(0.1);
  const random::Key dropout_key = random::key(42);
  train::ClassifierStep step(apply, tx);
  // Without a key the step cannot drop, and says which stream the module needs.
  train::TrainState keyless = step.init(init);
  CHECK_THROWS_WITH_AS(step(keyless, b.x, b.y),
                       doctest::Contains("needs a key from the rng stream \"dropout\""),
                       ValueError);
  step.set_dropout_key(dropout_key);
  train::TrainState state = step.init(init);
  Tree params = init;
  std::vector<float> losses;
  for (std::uint32_t i = 0; i < 3; ++i) {
    losses.push_back(step(state, b.x, b.y));
    // The same step eagerly, the mask drawn on the host from fold_in(key, i).
    const nn::RngStreams rngs{{"dropout", random::fold_in(dropout_key, i)}};
    const Tree args[] = {params};
    const int argnums[] = {0};
    const ValueAndGrad r = value_and_grad(
        [&](std::span<const Tree> a) {
          return mean(o::softmax_cross_entropy_with_integer_labels(
              apply(a[0], Tree(), b.x, {.train = true, .rngs = rngs}).first, b.y));
        },
        args, argnums);
    CHECK(losses.back() == doctest::Approx(r.value.item<float>()).epsilon(1e-6));
    params = o::apply_gradients(tx, r.grads[0], tx.init(params), params).first;
    for (std::size_t l = 0; l < params.leaves().size(); ++l) {
      const std::vector<float> got = state.params.leaves()[l].to_vector<float>();
      const std::vector<float> want = params.leaves()[l].to_vector<float>();
      for (std::size_t j = 0; j < want.size(); ++j)
        CHECK(got[j] == doctest::Approx(want[j]).epsilon(1e-5));
    }
  }
  CHECK(step.traces() == 1);
  // Evaluation does not drop: the same logits every time.
  CHECK(step.evaluate(state.params, b.x, b.y).first == step.evaluate(state.params, b.x, b.y).first);
}
