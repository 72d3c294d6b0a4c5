// optax-compatible optimisers, schedules, clipping and losses: values computed by hand from
// optax's formulas, and spec errors. (Whole trajectories are checked against optax by the
// train_mlp reference cases.)
#include <doctest/doctest.h>

#include <cmath>

#include "flaxpp/io/optimizer_spec.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/losses.hpp"
#include "flaxpp/optim/transform.hpp"

using namespace flaxpp;
namespace o = flaxpp::optim;

namespace {
Tree leaf_tree(std::vector<float> v) {
  return Tree{{"w", Array::from_vector(v, Shape{static_cast<std::int64_t>(v.size())})}};
}
std::vector<float> leaf(const Tree& t) {
  return t["w"].array().to_vector<float>();
}
}  // namespace

TEST_CASE("schedules: optax's formulas at the boundaries") {
  CHECK(o::constant_schedule(0.1)(7) == 0.1f);
  const o::Schedule lin = o::linear_schedule(1.0, 0.0, 10, 5);
  CHECK(lin(0) == 1.0f);
  CHECK(lin(5) == 1.0f);
  CHECK(lin(10) == doctest::Approx(0.5));
  CHECK(lin(100) == 0.0f);
  const o::Schedule cos = o::cosine_decay_schedule(2.0, 10, 0.1);
  CHECK(cos(0) == doctest::Approx(2.0));
  CHECK(cos(5) == doctest::Approx(2.0 * (0.9 * 0.5 + 0.1)));
  CHECK(cos(20) == doctest::Approx(0.2));
  const o::Schedule warm = o::warmup_cosine_decay_schedule(0.0, 1.0, 4, 14, 0.1);
  CHECK(warm(0) == 0.0f);
  CHECK(warm(2) == doctest::Approx(0.5));
  CHECK(warm(4) == doctest::Approx(1.0));
  CHECK(warm(14) == doctest::Approx(0.1));
  // Its own arguments are named, not the inner cosine_decay_schedule's decay_steps of -6.
  CHECK_THROWS_WITH_AS(o::warmup_cosine_decay_schedule(0.0, 1.0, 10, 4, 0.1),
                       doctest::Contains("warmup_cosine_decay_schedule: decay_steps (4) must "
                                         "exceed warmup_steps (10)"),
                       ValueError);
}

TEST_CASE("sgd: updates are -lr * g; momentum keeps a trace; nesterov looks ahead") {
  const Tree g = leaf_tree({1.0f, -2.0f});
  o::GradientTransformation tx = o::sgd(0.1);
  auto [u, s] = tx.update(g, tx.init(g), g);
  CHECK(leaf(u) == std::vector<float>{-0.1f, 0.2f});
  tx = o::sgd(1.0, 0.5, true);
  Tree state = tx.init(g);
  std::tie(u, state) = tx.update(g, state, g);  // trace = g; nesterov update = g + 0.5 g
  CHECK(leaf(u) == std::vector<float>{-1.5f, 3.0f});
  std::tie(u, state) = tx.update(g, state, g);  // trace = g + 0.5 g = 1.5 g; update = g + 0.75 g
  CHECK(leaf(u) == std::vector<float>{-1.75f, 3.5f});
}

TEST_CASE("adam: the first update is -lr * g / (|g| + eps) after bias correction") {
  const Tree g = leaf_tree({0.5f, -4.0f});
  const o::GradientTransformation tx = o::adam(0.01);
  auto [u, s] = tx.update(g, tx.init(g), g);
  CHECK(leaf(u)[0] == doctest::Approx(-0.01).epsilon(1e-5));
  CHECK(leaf(u)[1] == doctest::Approx(0.01).epsilon(1e-5));
  CHECK(s["0"]["count"].array().to_vector<std::int32_t>()[0] == 1);
}

TEST_CASE("clip_by_global_norm: rescales to max_norm only when the norm exceeds it") {
  const Tree g = leaf_tree({3.0f, 4.0f});  // norm 5
  auto clipped = o::clip_by_global_norm(1.0).update(g, Tree(), g).first;
  CHECK(leaf(clipped)[0] == doctest::Approx(0.6));
  CHECK(leaf(clipped)[1] == doctest::Approx(0.8));
  CHECK(leaf(o::clip_by_global_norm(10.0).update(g, Tree(), g).first) == leaf(g));
  CHECK(o::global_norm(g).to_vector<float>()[0] == 5.0f);
}

TEST_CASE("losses: cross-entropy with integer labels equals -log softmax at the label") {
  const Array logits =
      Array::from_vector(std::vector<float>{1.0f, 2.0f, 3.0f, 0.0f, 0.0f, 0.0f}, Shape{2, 3});
  const Array labels = Array::from_vector(std::vector<std::int32_t>{2, 0}, Shape{2});
  const auto ce = o::softmax_cross_entropy_with_integer_labels(logits, labels).to_vector<float>();
  CHECK(
      ce[0] ==
      doctest::Approx(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0).epsilon(1e-6));
  CHECK(ce[1] == doctest::Approx(std::log(3.0)).epsilon(1e-6));
  const auto dense = o::softmax_cross_entropy(logits, one_hot(labels, 3)).to_vector<float>();
  CHECK(dense[0] == doctest::Approx(ce[0]).epsilon(1e-6));
  CHECK(o::accuracy(logits, labels).to_vector<float>()[0] ==
        1.0f);  // row 2 ties: argmax picks class 0
  CHECK(o::l2_loss(Array::scalar(3.0f), Array::scalar(1.0f)).to_vector<float>()[0] == 2.0f);
  const float bce = o::sigmoid_binary_cross_entropy(Array::scalar(0.0f), Array::scalar(1.0f))
                        .to_vector<float>()[0];
  CHECK(bce == doctest::Approx(std::log(2.0)).epsilon(1e-6));
}

TEST_CASE("losses: labels of another length than the logits' rows are named as labels") {
  const Array logits = Array::full(Shape{4, 3}, 0.0, DType::f32);
  const Array labels = Array::from_vector(std::vector<std::int32_t>{0, 1, 2}, Shape{3});
  CHECK_THROWS_WITH_AS(o::softmax_cross_entropy_with_integer_labels(logits, labels),
                       doctest::Contains("labels i32[3] do not match logits f32[4,3]; expected one "
                                         "class id per row of the logits, labels of shape [4]"),
                       ValueError);
}

TEST_CASE("optimizer specs: optax's arguments by name; anything else is a clear error") {
  using io::Json;
  CHECK_NOTHROW(io::optimizer_from_spec(
      Json::parse(R"({"name": "adamw", "learning_rate": 0.001, "weight_decay": 0.01})")));
  CHECK_NOTHROW(io::optimizer_from_spec(Json::parse(
      R"({"name": "sgd", "learning_rate": {"name": "cosine_decay", "init_value": 0.1, "decay_steps": 100}, "clip_by_global_norm": 1.0})")));
  CHECK_THROWS_WITH_AS(io::optimizer_from_spec(Json::parse(
                           R"({"name": "adam", "learning_rate": 0.1, "momentum": 0.9})")),
                       doctest::Contains("adam does not accept \"momentum\""), ParseError);
  CHECK_THROWS_WITH_AS(
      io::optimizer_from_spec(Json::parse(R"({"name": "lamb", "learning_rate": 0.1})")),
      doctest::Contains("unknown optimizer \"lamb\""), ParseError);
  CHECK_THROWS_WITH_AS(
      io::optimizer_from_spec(Json::parse(R"({"name": "sgd", "learning_rate": {"name": "step"}})")),
      doctest::Contains("unknown schedule \"step\""), ParseError);
  CHECK_THROWS_WITH_AS(io::optimizer_from_spec(Json::parse(R"({"name": "sgd"})")),
                       doctest::Contains("needs \"learning_rate\""), ParseError);
}
