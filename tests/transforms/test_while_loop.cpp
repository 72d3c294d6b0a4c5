// while_loop and fori_loop: values against the loop written out (captured arrays, no
// iteration), fori_loop's gradients (float64 finite differences, under every checkpoint
// policy, under jit), while_loop's gradient refused with a message that names the way out, and
// bad input.
#include <doctest/doctest.h>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/while_loop.hpp"
#include "harness/close.hpp"
#include "harness/finite_diff.hpp"

using namespace flaxpp;
using testing::check_close;
namespace cp = flaxpp::checkpoint_policies;

namespace {

// JAX's fori_loss(w, x) = sum(fori_loop(lower, upper, lambda i, y: tanh(y @ w) + i, x) ** 2).
ArrayFn fori_loss(std::int32_t lower, std::int32_t upper) {
  return [=](std::span<const Array> a) {
    const Array w = a[0];
    const lax::ForiBody step = [&](const Array& i, std::span<const Array> y) {
      return std::vector<Array>{tanh(matmul(y[0], w)) + astype(i, y[0].dtype())};
    };
    const std::vector<Array> y = lax::fori_loop(lower, upper, step, a.subspan(1, 1));
    return std::vector<Array>{sum(square(y[0]))};
  };
}

std::vector<Array> unrolled(std::span<const Array> a, std::int32_t lower, std::int32_t upper) {
  Array y = a[1];
  for (std::int32_t i = lower; i < upper; ++i)
    y = tanh(matmul(y, a[0])) + Array::scalar(static_cast<double>(i));
  return {sum(square(y))};
}

std::vector<Array> inputs() {
  return {testing::random_f64(Shape{4, 4}, 1, -0.5, 0.5), testing::random_f64(Shape{3, 4}, 2)};
}

// The cotangent of a scalar loss (made when a test runs, on its device).
std::vector<Array> one() {
  return {Array::scalar(1.0)};
}

}  // namespace

TEST_CASE("while_loop: runs while the predicate holds; captured arrays; no iteration") {
  // Doubles x until its sum exceeds a captured limit: 1 -> 2 -> 4 -> ... -> 16 for limit 10.
  const Array limit = Array::scalar(10.0), two = Array::scalar(2.0);
  const lax::LoopCond below = [&](std::span<const Array> c) { return lax::le(c[0], limit); };
  const lax::LoopBody twice = [&](std::span<const Array> c) {
    return std::vector<Array>{c[0] * two, c[1] + Array::scalar(std::int32_t{1})};
  };
  const std::vector<Array> init{Array::scalar(1.0), Array::scalar(std::int32_t{0})};
  std::vector<Array> out = lax::while_loop(below, twice, init);
  CHECK(out[0].item<double>() == 16.0);
  CHECK(out[1].item<std::int32_t>() == 4);
  const std::vector<Array> big{Array::scalar(50.0), Array::scalar(std::int32_t{0})};
  out = lax::while_loop(below, twice, big);
  CHECK(out[0].item<double>() == 50.0);
  CHECK(out[1].item<std::int32_t>() == 0);
}

TEST_CASE("fori_loop: static and run-time bounds give the loop written out") {
  const auto a = inputs();
  for (const std::pair<int, int>& range :
       {std::pair{0, 3}, std::pair{2, 5}, std::pair{3, 3}, std::pair{4, 1}}) {
    const int lo = range.first, hi = range.second;
    CAPTURE(lo);
    CAPTURE(hi);
    const double want = unrolled(a, lo, hi)[0].item<double>();
    CHECK(fori_loss(lo, hi)(a)[0].item<double>() == doctest::Approx(want).epsilon(1e-12));
    const lax::ForiBody step = [&](const Array& i, std::span<const Array> y) {
      return std::vector<Array>{tanh(matmul(y[0], a[0])) + astype(i, DType::f64)};
    };
    const std::vector<Array> y = lax::fori_loop(Array::scalar(lo), Array::scalar(hi), step,
                                                std::span<const Array>(a).subspan(1, 1));
    CHECK(sum(square(y[0])).item<double>() == doctest::Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("fori_loop with static bounds: gradients as the loop written out, under every policy") {
  const auto a = inputs();
  testing::check_grad(fori_loss(0, 3), a);
  const auto want =
      vjp([](std::span<const Array> x) { return unrolled(x, 1, 4); }, a).backward(one());
  check_close(vjp(fori_loss(1, 4), a).backward(one()), want);
  for (const PolicyPtr& p : {cp::everything_saveable(), cp::nothing_saveable(), cp::dots_saveable(),
                             cp::dots_with_no_batch_dims_saveable()}) {
    CAPTURE(p->str());
    check_close(vjp(checkpoint(fori_loss(1, 4), p), a).backward(one()), want);
  }
  const TreeFn step = [](std::span<const Tree> t) {
    const std::vector<Array> x{t[0].array(), t[1].array()};
    const VjpResult r = vjp(fori_loss(1, 4), x);
    const std::vector<Array> g = r.backward(one());
    return std::vector<Tree>{Tree(r.outputs[0]), Tree(g[0]), Tree(g[1])};
  };
  const std::vector<Tree> in{Tree(a[0]), Tree(a[1])};
  const std::vector<Tree> got = jit(step)(in);
  check_close({got[1].array(), got[2].array()}, want);
}

TEST_CASE("while_loop: asking for its gradient is an error that names fori_loop and scan") {
  const auto a = inputs();
  const ArrayFn dynamic = [](std::span<const Array> x) {
    const lax::ForiBody step = [&](const Array&, std::span<const Array> y) {
      return std::vector<Array>{tanh(matmul(y[0], x[0]))};
    };
    const std::vector<Array> y =
        lax::fori_loop(Array::scalar(0), Array::scalar(3), step, x.subspan(1, 1));
    return std::vector<Array>{sum(y[0])};
  };
  CHECK_THROWS_WITH_AS(vjp(dynamic, a).backward(one()),
                       doctest::Contains("Use lax::fori_loop with static bounds, or scan"),
                       ValueError);
}

TEST_CASE("while_loop and fori_loop: bad input is a clear error") {
  const std::vector<Array> init{Array::scalar(1.0)};
  const lax::LoopBody same = [](std::span<const Array> c) { return std::vector<Array>{c[0]}; };
  CHECK_THROWS_WITH_AS(lax::while_loop([](std::span<const Array> c) { return c[0]; }, same, init),
                       doctest::Contains("cond_fun must return a bool scalar, got f64[]"),
                       ValueError);
  CHECK_THROWS_WITH_AS(
      lax::while_loop(
          [](std::span<const Array> c) { return less(c[0], c[0]); },
          [](std::span<const Array> c) { return std::vector<Array>{astype(c[0], DType::f32)}; },
          init),
      doctest::Contains("body_fun must return the carry's shapes and dtypes, (f64[]), but "
                        "returned (f32[])"),
      ValueError);
  CHECK_THROWS_WITH_AS(
      lax::fori_loop(
          0, 2, [](const Array&, std::span<const Array>) { return std::vector<Array>{}; }, init),
      doctest::Contains("fori_loop: body_fun must return the carry's shapes and dtypes"),
      ValueError);
  CHECK_THROWS_WITH_AS(lax::fori_loop(Array::scalar(0.0), Array::scalar(2), {}, init),
                       doctest::Contains("the bounds must be int32 scalars, got f64[]"),
                       ValueError);
}
