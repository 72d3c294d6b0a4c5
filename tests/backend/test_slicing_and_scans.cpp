// slice, pad, concatenate, argmax, argmin and cumsum, and their jax.numpy spellings, on the
// default device (ctest reruns the suite on CUDA): hand-computed results, JAX's tie and NaN
// rules, shape rules that name what they expected, and every VJP against float64 central
// differences. Real-JAX values for all of them are in tests/refs/lax.json.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/ops/sampling.hpp"
#include "flaxpp/ops/slicing.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "harness/finite_diff.hpp"

using namespace flaxpp;
using testing::check_grad;
using testing::random_f64;

namespace {

Array on_device(std::vector<double> v, Shape shape) {
  return Array::from_vector(v, std::move(shape)).to(default_device());
}

std::vector<double> f64_values(const Array& a) {
  return astype(a.to(Device::cpu()), DType::f64).to_vector<double>();
}

std::vector<double> iota_values(std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>(i);
  return v;
}

}  // namespace

TEST_CASE("slice and rev: start, limit and stride per axis, and numpy's x[a:b:c] with any step") {
  const Array x = on_device(iota_values(24), Shape{4, 6});  // x[i, j] = 6i + j
  const Array s = lax::slice(x, {1, 1}, {4, 6}, {2, 2});
  CHECK(s.shape() == Shape{2, 3});
  CHECK(f64_values(s) == std::vector<double>{7, 9, 11, 19, 21, 23});
  CHECK(f64_values(slice(x, {{}, {-2, {}}})) == std::vector<double>{4, 5, 10, 11, 16, 17, 22, 23});
  CHECK(f64_values(slice(x, {{3, 100}})) == std::vector<double>{18, 19, 20, 21, 22, 23});
  CHECK(slice(x, {{3, 1}}).shape() == Shape{0, 6});
  CHECK_THROWS_WITH_AS(lax::slice(x, {0, 0}, {5, 6}), doctest::Contains("limit <= 4"), ValueError);
  CHECK(f64_values(slice(x, {{{}, {}, -2}, {4, 0, -3}})) == std::vector<double>{22, 19, 10, 7});
  CHECK(f64_values(slice(x, {{-1, -10, -1}, {-1, {}}})) == std::vector<double>{23, 17, 11, 5});
  CHECK(slice(x, {{0, 3, -1}}).shape() == Shape{0, 6});
  CHECK(f64_values(lax::rev(x, {0, 1})) == f64_values(slice(x, {{{}, {}, -1}, {{}, {}, -1}})));
  CHECK_THROWS_WITH_AS(slice(x, {{{}, {}, 0}}), doctest::Contains("step 0"), ValueError);
  CHECK_THROWS_WITH_AS(lax::rev(x, {1, 1}), doctest::Contains("distinct"), ValueError);
  check_grad([](auto v) { return std::vector<Array>{lax::rev(v[0], {1})}; },
             {random_f64(Shape{3, 4}, 16)});
  check_grad(
      [](auto v) {
        return std::vector<Array>{lax::slice(v[0], {1, 0}, {4, 5}, {2, 3})};
      },
      {random_f64(Shape{5, 6}, 1)});
}

TEST_CASE("pad: low, high and interior padding, negative padding crops") {
  const Array x = on_device({1, 2, 3}, Shape{3});
  const Array zero = lax::scalar(-1, DType::f64).to(default_device());
  const lax::PadConfig grow[] = {{2, 1, 1}};
  CHECK(f64_values(lax::pad(x, zero, grow)) == std::vector<double>{-1, -1, 1, -1, 2, -1, 3, -1});
  const lax::PadConfig crop[] = {{-2, 1, 1}};
  CHECK(f64_values(lax::pad(x, zero, crop)) == std::vector<double>{2, -1, 3, -1});
  const lax::PadConfig all[] = {{-2, -1, 0}};
  CHECK(lax::pad(x, zero, all).shape() == Shape{0});
  const lax::PadConfig too_much[] = {{-3, -1, 0}};
  CHECK_THROWS_WITH_AS(lax::pad(x, zero, too_much), doctest::Contains("crop more"), ValueError);
  const std::pair<std::int64_t, std::int64_t> widths[] = {{1, 0}, {0, 2}};
  CHECK(f64_values(pad(on_device({1, 2}, Shape{1, 2}), widths, 7)) ==
        std::vector<double>{7, 7, 7, 7, 1, 2, 7, 7});
  const lax::PadConfig mixed[] = {{1, -1, 2}, {-1, 2, 0}};
  check_grad([&](auto v) { return std::vector<Array>{lax::pad(v[0], v[1], mixed)}; },
             {random_f64(Shape{3, 4}, 2), random_f64(Shape{}, 3)});
}

TEST_CASE("concatenate and stack: along any axis, with shape rules naming the operands") {
  const Array a = on_device({1, 2, 3, 4}, Shape{2, 2});
  const Array b = on_device({5, 6}, Shape{2, 1});
  const Array ab[] = {a, b};
  CHECK(f64_values(concatenate(ab, -1)) == std::vector<double>{1, 2, 5, 3, 4, 6});
  const Array rows[] = {a, on_device({7, 8}, Shape{1, 2})};
  CHECK(f64_values(concatenate(rows, 0)) == std::vector<double>{1, 2, 3, 4, 7, 8});
  CHECK_THROWS_WITH_AS(concatenate(ab, 0), doctest::Contains("every axis but 0"), ValueError);
  const Array pair[] = {on_device({1, 2}, Shape{2}), on_device({3, 4}, Shape{2})};
  CHECK(stack(pair, 1).shape() == Shape{2, 2});
  CHECK(f64_values(stack(pair, 1)) == std::vector<double>{1, 3, 2, 4});
  CHECK(f64_values(stack(pair, -2)) == std::vector<double>{1, 2, 3, 4});
  check_grad([](auto v) { return std::vector<Array>{lax::concatenate(v, 1)}; },
             {random_f64(Shape{2, 3}, 4), random_f64(Shape{2, 1}, 5), random_f64(Shape{2, 2}, 6)});
}

TEST_CASE("argmax and argmin: the first of ties, the first NaN, along any axis") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Array x = on_device({1, nan, 3, nan, 2}, Shape{5});
  CHECK(argmax(x).item<std::int32_t>() == 1);
  CHECK(argmin(x).item<std::int32_t>() == 1);
  const Array ties = on_device({1, 3, 3, -1, -1}, Shape{5});
  CHECK(argmax(ties).item<std::int32_t>() == 1);
  CHECK(argmin(ties).item<std::int32_t>() == 3);
  const Array m = on_device({0, 5, 2, 7, 1, 4}, Shape{2, 3});
  CHECK(argmax(m, 1).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 0});
  CHECK(argmax(m, 0).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 0, 1});
  CHECK(argmin(m, 0, true).shape() == Shape{1, 3});
  CHECK(argmax(m).item<std::int32_t>() == 3);
  CHECK(argmax(astype(m, DType::i32), -1).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{1, 0});
  CHECK_THROWS_WITH_AS(argmax(zeros(Shape{2, 0}), 1), doctest::Contains("empty"), ValueError);
}

TEST_CASE("cumsum: running sums along an axis, forwards and reversed, in order") {
  const Array m = on_device({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  CHECK(f64_values(cumsum(m, 1)) == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(f64_values(cumsum(m, 0)) == std::vector<double>{1, 2, 3, 5, 7, 9});
  CHECK(f64_values(lax::cumsum(m, 1, true)) == std::vector<double>{6, 5, 3, 15, 11, 6});
  CHECK(f64_values(cumsum(m)) == std::vector<double>{1, 3, 6, 10, 15, 21});
  CHECK(f64_values(cumsum(astype(m, DType::i32), 1)) == std::vector<double>{1, 3, 6, 4, 9, 15});
  check_grad([](auto v) { return std::vector<Array>{lax::cumsum(v[0], 0)}; },
             {random_f64(Shape{4, 3}, 7)});
  check_grad([](auto v) { return std::vector<Array>{lax::cumsum(v[0], 1, true)}; },
             {random_f64(Shape{4, 3}, 8)});
}

TEST_CASE("clip and one_hot as jax.numpy and jax.nn spell them") {
  const Array x = on_device({-2, 0.5, 3}, Shape{3});
  CHECK(f64_values(clip(x, 0.0, 1.0)) == std::vector<double>{0, 0.5, 1});
  CHECK(f64_values(clip(x, std::nullopt, 1.0)) == std::vector<double>{-2, 0.5, 1});
  check_grad([](auto v) { return std::vector<Array>{clip(v[0], -0.5, 0.5)}; },
             {random_f64(Shape{3, 4}, 9)});
  const Array labels = Array::from_vector(std::vector<std::int32_t>{2, 0, 5}, Shape{3});
  CHECK(f64_values(one_hot(labels.to(default_device()), 3)) ==
        std::vector<double>{0, 0, 1, 1, 0, 0, 0, 0, 0});
}

TEST_CASE("dynamic_slice and dynamic_update_slice: negative starts from the end, clamped to fit") {
  const Array x = on_device(iota_values(12), Shape{3, 4});
  auto at = [](std::int32_t i) { return Array::scalar(i, default_device()); };
  const Array starts[] = {at(1), at(-9)};  // (1, -5), clamped to (1, 0)
  CHECK(f64_values(lax::dynamic_slice(x, starts, {2, 2})) == std::vector<double>{4, 5, 8, 9});
  const Array past_end[] = {at(7), at(3)};  // clamped to (1, 2)
  CHECK(f64_values(lax::dynamic_slice(x, past_end, {2, 2})) == std::vector<double>{6, 7, 10, 11});
  const Array from_end[] = {at(-1), at(-3)};  // (2, 1), then clamped to (1, 1)
  CHECK(f64_values(lax::dynamic_slice(x, from_end, {2, 2})) == std::vector<double>{5, 6, 9, 10});
  const Array update = on_device({-1, -2}, Shape{1, 2});
  const Array corner[] = {at(5), at(9)};  // clamped to (2, 2)
  CHECK(f64_values(lax::dynamic_update_slice(x, update, corner)) ==
        std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2});
  CHECK_THROWS_WITH_AS(lax::dynamic_slice(x, starts, {4, 1}), doctest::Contains("[0, 3]"),
                       ValueError);
  const Array one[] = {at(0)};
  CHECK_THROWS_WITH_AS(lax::dynamic_slice(x, one, {1, 1}), doctest::Contains("one start index"),
                       ValueError);
  const Array s[] = {at(1), at(2)};
  check_grad(
      [&](auto v) {
        return std::vector<Array>{lax::dynamic_slice(v[0], s, {2, 2})};
      },
      {random_f64(Shape{3, 5}, 10)});
  check_grad([&](auto v) { return std::vector<Array>{lax::dynamic_update_slice(v[0], v[1], s)}; },
             {random_f64(Shape{3, 5}, 11), random_f64(Shape{2, 3}, 12)});
}

TEST_CASE("sort, argsort and top_k: stable, NaN last (first for top_k), signed zeros for top_k") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = HUGE_VAL;
  const Array x = on_device({1, nan, -0.0, 3, 0, nan, -inf, 3, -1}, Shape{9});
  CHECK(argsort(x).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{6, 8, 2, 4, 0, 3, 7, 1, 5});
  CHECK(argsort(x, -1, true).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{1, 5, 3, 7, 0, 2, 4, 8, 6});
  const auto [values, indices] = lax::top_k(x, 5);
  CHECK(indices.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 5, 3, 7, 0});
  CHECK(std::isnan(f64_values(values)[0]));
  CHECK(
      lax::top_k(on_device({0.0, -0.0, 0.0, -0.0}, Shape{4}), 4).second.to_vector<std::int32_t>() ==
      std::vector<std::int32_t>{0, 2, 1, 3});
  const Array m = on_device({3, 1, 2, 0, 5, 4}, Shape{2, 3});
  CHECK(f64_values(sort(m, 0)) == std::vector<double>{0, 1, 2, 3, 5, 4});
  CHECK(f64_values(sort(m)) == std::vector<double>{1, 2, 3, 0, 4, 5});
  CHECK(f64_values(sort(m, std::nullopt)) == std::vector<double>{0, 1, 2, 3, 4, 5});
  CHECK(argsort(astype(m, DType::i32), 1).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{1, 2, 0, 0, 2, 1});
  CHECK_THROWS_WITH_AS(lax::top_k(m, 4), doctest::Contains("[0, 3]"), ValueError);
  check_grad([](auto v) { return std::vector<Array>{lax::sort(v[0], 1)}; },
             {random_f64(Shape{3, 5}, 13)});
  check_grad([](auto v) { return std::vector<Array>{lax::sort(v[0], 0)}; },
             {random_f64(Shape{4, 2}, 14)});
  check_grad([](auto v) { return std::vector<Array>{lax::top_k(v[0], 2).first}; },
             {random_f64(Shape{3, 6}, 15)});
}

TEST_CASE("random.categorical: the same draws eager and under jit, shaped as JAX shapes them") {
  const random::Key key = random::key(3);
  const Array logits = astype(on_device(iota_values(12), Shape{3, 4}), DType::f32) * 0.25;
  const Array eager = random::categorical(key, logits);
  CHECK(eager.aval() == AVal{Shape{3}, DType::i32});
  const auto traced = jit([&](const Array& l) { return random::categorical(key, l); });
  CHECK(traced(logits).to_vector<std::int32_t>() == eager.to_vector<std::int32_t>());
  CHECK(random::categorical(key, logits, 0, Shape{5, 4}).shape() == Shape{5, 4});
  CHECK_THROWS_WITH_AS(random::categorical(key, logits, -1, Shape{4}),
                       doctest::Contains("must end with"), ValueError);
}
