// train::fit, the training loop: the steps of a hand-written loop over the same batches, bit for
// bit; a run stopped and resumed from its checkpoint equal to the uninterrupted one; a stop on
// request saved; a non-finite loss stopping without saving it (or training on); bad options
// refused.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "flaxpp/core/error.hpp"
#include "flaxpp/data/dataset.hpp"
#include "flaxpp/io/checkpoint.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/train/fit.hpp"
#include "harness/finite_diff.hpp"
#include "harness/temp_dir.hpp"
#include "harness/tree_bits.hpp"
#include "src/tools/mlp_apply.hpp"

using namespace flaxpp;
using testing::check_same_bits;

namespace {

// `rows` rows of 6 features, labels 0..3 from the features' signs.
data::Dataset dataset(std::int64_t rows, unsigned seed) {
  const Array x = astype(testing::random_f64(Shape{rows, 6}, seed), DType::f32);
  const std::vector<float> v = x.to_vector<float>();
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < y.size(); ++i)
    y[i] = (v[6 * i] > 0 ? 1 : 0) + (v[6 * i + 1] > 0 ? 2 : 0);
  return {x, Array::from_vector(y, Shape{rows})};
}

const nn::MLP kMlp{.features = {16, 4}};

struct Setup {
  data::Dataset train = dataset(50, 1), test = dataset(20, 2);
  train::ClassifierStep step{train::mlp_apply(kMlp, checkpoint_policies::none()),
                             optim::adam(0.01)};
  train::TrainState fresh() const {
    return step.init(nn::Model(kMlp).init(random::key(0), train.x)["params"]);
  }
};

// Counts what fit reports, and stops when asked to at a given step.
struct Recorder final : train::FitObserver {
  std::int64_t stop_at = -1, steps = 0, saves = 0;
  std::vector<train::EpochMetrics> epochs;
  std::vector<std::string> nonfinites;
  bool stop_requested() override { return steps == stop_at; }
  void step_done(const train::StepProgress&) override { ++steps; }
  void epoch_done(const train::EpochMetrics& m) override { epochs.push_back(m); }
  void saved(const train::TrainState&) override { ++saves; }
  void nonfinite(const std::string& what) override { nonfinites.push_back(what); }
};

}  // namespace

TEST_CASE(
    "train::fit takes the steps of a hand-written loop over the seeded batches, bit for bit") {
  Setup s;
  train::TrainState state = s.fresh(), by_hand = s.fresh();
  Recorder recorder;
  const train::FitResult r =
      train::fit(s.step, state, train::Rows::of(s.train), train::Rows::of(s.test),
                 {.epochs = 2, .batch_size = 16, .seed = 7}, recorder);
  for (std::int64_t epoch = 0; epoch < 2; ++epoch)
    for (const auto& batch : data::epoch_batches(50, 16, 7, epoch, false)) {
      const data::Dataset b = data::take(s.train, batch);
      s.step(by_hand, b.x, b.y);
    }
  check_same_bits(state.params, by_hand.params);
  CHECK(state.step == 8);  // 4 batches (16, 16, 16, 2) a epoch
  CHECK(r.end == train::FitResult::End::finished);
  CHECK(r.steps_taken == 8);
  CHECK(recorder.steps == 8);
  REQUIRE(r.epochs.size() == 2);
  CHECK(recorder.epochs.size() == 2);
  CHECK(r.epochs[1].epoch == 2);
  CHECK(r.epochs[1].step == 8);
  const auto [test_loss, test_accuracy] = s.step.evaluate(by_hand, s.test.x, s.test.y, 16);
  CHECK(r.epochs[1].test_loss == test_loss);
  CHECK(r.test_accuracy == test_accuracy);
  CHECK(r.saved_step == -1);  // no checkpoint file was asked for
}

TEST_CASE("train::fit stopped at max_steps resumes from its checkpoint to the uninterrupted run") {
  Setup s;
  const testing::TempDir dir;
  const std::string checkpoint = dir / "state.msgpack";
  const train::Rows train = train::Rows::of(s.train), test = train::Rows::of(s.test);
  train::TrainState whole = s.fresh();
  train::fit(s.step, whole, train, test, {.epochs = 3, .batch_size = 16});

  train::TrainState first = s.fresh();
  const train::FitResult stopped =
      train::fit(s.step, first, train, test,
                 {.epochs = 3, .batch_size = 16, .max_steps = 6, .checkpoint = checkpoint});
  CHECK(stopped.end == train::FitResult::End::max_steps);
  CHECK(stopped.saved_step == 6);
  CHECK(stopped.epochs.size() == 1);  // the first epoch ended at step 4
  CHECK(io::load_checkpoint(checkpoint)["step"].array().to_vector<std::int32_t>()[0] == 6);

  // A fresh state: fit reads the checkpoint back.
  train::TrainState resumed = s.fresh();
  const train::FitResult rest = train::fit(
      s.step, resumed, train, test, {.epochs = 3, .batch_size = 16, .checkpoint = checkpoint});
  CHECK(rest.end == train::FitResult::End::finished);
  CHECK(rest.steps_taken == 6);
  CHECK(rest.saved_step == 12);
  check_same_bits(resumed.params, whole.params);
  check_same_bits(resumed.opt_state, whole.opt_state);

  // At the end already: nothing is trained or written.
  const auto written = std::filesystem::last_write_time(checkpoint);
  const train::FitResult again = train::fit(
      s.step, resumed, train, test, {.epochs = 3, .batch_size = 16, .checkpoint = checkpoint});
  CHECK(again.steps_taken == 0);
  CHECK(std::filesystem::last_write_time(checkpoint) == written);
}

TEST_CASE("train::fit ends at a requested stop with a checkpoint of that step") {
  Setup s;
  const testing::TempDir dir;
  train::TrainState state = s.fresh();
  Recorder recorder;
  recorder.stop_at = 5;
  const train::FitResult r =
      train::fit(s.step, state, train::Rows::of(s.train), train::Rows::of(s.test),
                 {.epochs = 3, .batch_size = 16, .checkpoint = dir / "state.json"}, recorder);
  CHECK(r.end == train::FitResult::End::stop_requested);
  CHECK(state.step == 5);
  CHECK(r.saved_step == 5);
  CHECK(recorder.saves == 2);  // the first epoch's end, and the stop
  CHECK(s.step.restore(io::load_checkpoint(dir / "state.json")).step == 5);
}

TEST_CASE("train::fit stops on a non-finite loss without saving it, or trains on when asked") {
  Setup s;
  const testing::TempDir dir;
  // Rows 40 on hold a NaN feature: the loss of the batch that first holds one is NaN.
  std::vector<float> x = s.train.x.to_vector<float>();
  for (std::size_t i = 40 * 6; i < x.size(); ++i)
    x[i] = std::numeric_limits<float>::quiet_NaN();
  s.train.x = Array::from_vector(x, s.train.x.shape());
  const train::Rows train = train::Rows::of(s.train), test = train::Rows::of(s.test);

  train::TrainState state = s.fresh();
  Recorder recorder;
  const train::FitResult r =
      train::fit(s.step, state, train, test,
                 {.epochs = 2, .batch_size = 50, .checkpoint = dir / "state.json"}, recorder);
  CHECK(r.end == train::FitResult::End::nonfinite);
  CHECK(r.nonfinite.starts_with("the loss became nan at step 1 (epoch 1, batch 1 of 1)"));
  CHECK(r.saved_step == -1);
  CHECK_FALSE(std::filesystem::exists(dir / "state.json"));
  CHECK(recorder.nonfinites.empty());

  train::TrainState on = s.fresh();
  const train::FitResult going = train::fit(
      s.step, on, train, test,
      {.epochs = 2, .batch_size = 50, .on_nonfinite = train::OnNonfinite::keep_going}, recorder);
  CHECK(going.end == train::FitResult::End::finished);
  CHECK(on.step == 2);
  CHECK_FALSE(recorder.nonfinites.empty());
  CHECK(train::first_nonfinite(on.params).has_value());
}

TEST_CASE("train::fit refuses options it cannot run, saying which") {
  Setup s;
  train::TrainState state = s.fresh();
  const train::Rows train = train::Rows::of(s.train), test = train::Rows::of(s.test);
  CHECK_THROWS_WITH_AS(train::fit(s.step, state, train, test, {.epochs = 0}),
                       doctest::Contains("epochs must be at least 1, got 0"), ValueError);
  CHECK_THROWS_WITH_AS(train::fit(s.step, state, train, test, {.batch_size = 0}),
                       doctest::Contains("batch_size must be at least 1, got 0"), ValueError);
  CHECK_THROWS_WITH_AS(train::fit(s.step, state, train, train::Rows{}, {}),
                       doctest::Contains("the training and the test set need a row each"),
                       ValueError);
  CHECK(state.step == 0);
  CHECK(train::smallest_batch_rows(50, 16) == 2);
  CHECK(train::smallest_batch_rows(48, 16) == 16);
  CHECK(train::smallest_batch_rows(10, 16) == 10);
}
