// cond and switch: the chosen branch's values (index clamped, captured arrays, trees),
// gradients (float64 finite differences; inside checkpoint under every policy equal to the plain
// ones), what each policy keeps (JAX's saved_residuals for the same functions), under jit, and
// bad input.
#include <doctest/doctest.h>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/cond.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "harness/close.hpp"
#include "harness/finite_diff.hpp"

using namespace flaxpp;
using testing::check_close;
namespace cp = flaxpp::checkpoint_policies;

namespace {

// JAX's cond_loss(w, x) = sum(cond(sum(x) > 0, tanh(x @ w), sin(x) * w[0]) ** 2).
std::vector<Array> cond_loss(std::span<const Array> a) {
  const Array &w = a[0], &x = a[1];
  const lax::Branch on_true = [](std::span<const Array> o) {
    return std::vector<Array>{tanh(matmul(o[1], o[0]))};
  };
  const lax::Branch on_false = [](std::span<const Array> o) {
    return std::vector<Array>{sin(o[1]) * lax::take(o[0], Array::scalar(std::int32_t{0}))};
  };
  const std::vector<Array> y = lax::cond(greater(sum(x), Array::full(Shape{}, 0.0, x.dtype())),
                                         on_true, on_false, std::vector<Array>{w, x});
  return {sum(square(y[0]))};
}

// switch_loss(w, x) with branches tanh(x @ w), sin(x) * w[0], (x @ w) @ w at `index`.
ArrayFn switch_loss(std::int32_t index) {
  return [index](std::span<const Array> a) {
    const std::vector<lax::Branch> branches{
        [](std::span<const Array> o) { return std::vector<Array>{tanh(matmul(o[1], o[0]))}; },
        [](std::span<const Array> o) {
          return std::vector<Array>{sin(o[1]) * lax::take(o[0], Array::scalar(std::int32_t{0}))};
        },
        [](std::span<const Array> o) {
          return std::vector<Array>{matmul(matmul(o[1], o[0]), o[0])};
        }};
    const std::vector<Array> y =
        lax::switch_(Array::scalar(index), branches, std::vector<Array>{a[0], a[1]});
    return std::vector<Array>{sum(square(y[0]))};
  };
}

std::vector<Array> inputs(double sign, DType dtype = DType::f64) {
  Array w = testing::random_f64(Shape{4, 4}, 1, -0.5, 0.5);
  Array x = testing::random_f64(Shape{3, 4}, 2, 0.1, 1.0) * Array::scalar(sign);
  return {astype(w, dtype), astype(x, dtype)};
}

// The cotangent of a scalar loss (made when a test runs, on its device).
std::vector<Array> one() {
  return {Array::scalar(1.0)};
}

}  // namespace

TEST_CASE("cond and switch: the chosen branch's results; the index is clamped") {
  const auto pos = inputs(1.0), neg = inputs(-1.0);
  const Array w = pos[0];
  CHECK(cond_loss(pos)[0].item<double>() ==
        doctest::Approx(sum(square(tanh(matmul(pos[1], w)))).item<double>()));
  CHECK(
      cond_loss(neg)[0].item<double>() ==
      doctest::Approx(
          sum(square(sin(neg[1]) * lax::take(w, Array::scalar(std::int32_t{0})))).item<double>()));
  // Out of range: -5 runs branch 0, 7 the last.
  CHECK(switch_loss(-5)(pos)[0].item<double>() == switch_loss(0)(pos)[0].item<double>());
  CHECK(switch_loss(7)(pos)[0].item<double>() == switch_loss(2)(pos)[0].item<double>());
  // A captured array becomes an operand of every branch; a numeric predicate is true when
  // non-zero; a tree goes through whole.
  const Array c = Array::scalar(3.0);
  const lax::Branch times_c = [&](std::span<const Array> o) {
    return std::vector<Array>{o[0] * c};
  };
  const lax::Branch same = [](std::span<const Array> o) { return std::vector<Array>{o[0]}; };
  const std::vector<Array> two{Array::scalar(2.0)};
  CHECK(lax::cond(Array::scalar(std::int32_t{5}), times_c, same, two)[0].item<double>() == 6.0);
  CHECK(lax::cond(Array::scalar(0.0), times_c, same, two)[0].item<double>() == 2.0);
  const Tree t{{"a", Array::scalar(1.0)}, {"b", Array::scalar(2.0)}};
  const Tree swapped = lax::cond(
      Array::scalar(true),
      [](const Tree& o) {
        return Tree{{"a", o["b"]}, {"b", o["a"]}};
      },
      [](const Tree& o) { return o; }, t);
  CHECK(swapped["a"].array().item<double>() == 2.0);
  CHECK(swapped["b"].array().item<double>() == 1.0);
}

TEST_CASE("cond and switch: gradients match float64 finite differences in every branch") {
  testing::check_grad(cond_loss, inputs(1.0));
  testing::check_grad(cond_loss, inputs(-1.0));
  for (std::int32_t k : {0, 1, 2}) {
    CAPTURE(k);
    testing::check_grad(switch_loss(k), inputs(1.0));
  }
}

TEST_CASE("cond inside checkpoint: every policy gives the plain gradients") {
  for (double sign : {1.0, -1.0}) {
    const auto args = inputs(sign);
    const auto want = vjp(cond_loss, args).backward(one());
    for (const PolicyPtr& p : {cp::everything_saveable(), cp::nothing_saveable(),
                               cp::dots_saveable(), cp::dots_with_no_batch_dims_saveable()}) {
      CAPTURE(p->str());
      check_close(vjp(checkpoint(cond_loss, p), args).backward(one()), want);
      check_close(vjp(checkpoint(switch_loss(2), p), args).backward(one()),
                  vjp(switch_loss(2), args).backward(one()));
    }
  }
}

TEST_CASE(
    "cond inside checkpoint: the policy reaches into the branches, as JAX's saved_residuals") {
  // jax._src.ad_checkpoint.saved_residuals(jax.checkpoint(cond_loss, policy), w, x) with
  // w f32[4,4], x f32[3,4]: nothing_saveable keeps the arguments; the dots policies keep the
  // branch's product too, as an output of the cond (one slot of f32[3,4]); switch's third
  // branch has two products of that type, so its cond keeps two slots for every branch.
  const auto args = inputs(1.0, DType::f32);
  const std::vector<std::string> names{"w", "x"};
  auto kinds = [&](const ArrayFn& f) {
    std::vector<std::string> out;
    for (const SavedResidual& r : saved_residuals(f, args))
      out.push_back(r.str(names));
    std::sort(out.begin(), out.end());
    return out;
  };
  const std::vector<std::string> arguments{"f32[3,4] from the argument x",
                                           "f32[4,4] from the argument w"};
  CHECK(kinds(checkpoint(cond_loss, cp::nothing_saveable())) == arguments);
  CHECK(kinds(checkpoint(switch_loss(0), cp::nothing_saveable())) == arguments);
  for (const PolicyPtr& p : {cp::dots_saveable(), cp::dots_with_no_batch_dims_saveable()}) {
    CAPTURE(p->str());
    const std::vector<std::string> one{"f32[3,4] from the argument x", "f32[3,4] output of cond",
                                       "f32[4,4] from the argument w"};
    CHECK(kinds(checkpoint(cond_loss, p)) == one);
    const std::vector<std::string> two{"f32[3,4] from the argument x", "f32[3,4] output of cond",
                                       "f32[3,4] output of cond", "f32[4,4] from the argument w"};
    CHECK(kinds(checkpoint(switch_loss(0), p)) == two);
    CHECK(kinds(checkpoint(switch_loss(2), p)) == two);
  }
}

TEST_CASE("cond under jit: values and gradients equal the eager ones") {
  const TreeFn step = [](std::span<const Tree> a) {
    const std::vector<Array> args{a[0].array(), a[1].array()};
    const VjpResult r = vjp(checkpoint(cond_loss, cp::dots_saveable()), args);
    const std::vector<Array> g = r.backward(one());
    return std::vector<Tree>{Tree(r.outputs[0]), Tree(g[0]), Tree(g[1])};
  };
  const Jitted jitted = jit(step);
  for (double sign : {1.0, -1.0}) {
    const auto args = inputs(sign);
    const std::vector<Tree> in{Tree(args[0]), Tree(args[1])};
    const std::vector<Tree> got = jitted(in), want = step(in);
    for (std::size_t k = 0; k < want.size(); ++k)
      check_close({got[k].array()}, {want[k].array()});
  }
  CHECK(jitted.num_traces() == 1);
}

TEST_CASE("cond under jit: memory analysis counts the largest branch and says it is not exact") {
  // y = cond(p, lambda x: outer(x, x) @ x, lambda x: x * 2): the first branch holds an
  // [n, n] temporary, which the peak includes whichever branch runs.
  const std::int64_t n = 64;
  const TreeFn step = [](std::span<const Tree> a) {
    const lax::Branch small = [](std::span<const Array> o) {
      return std::vector<Array>{o[0] * Array::scalar(2.0)};
    };
    const lax::Branch big = [](std::span<const Array> o) {
      const std::int64_t len = o[0].shape()[0];
      const Array col = reshape(o[0], {len, 1}), row = reshape(o[0], {1, len});
      return std::vector<Array>{reshape(matmul(col * row, col), {len})};
    };
    const std::vector<Array> x{a[1].array()};
    return std::vector<Tree>{Tree(lax::cond(a[0].array(), big, small, x)[0])};
  };
  const std::vector<Tree> args{Tree(Array::scalar(true)),
                               Tree(Array::full(Shape{n}, 1.0, DType::f64))};
  const CompiledStep compiled = jit(step).lower(args);
  const MemoryAnalysis& m = compiled.memory_analysis();
  CAPTURE(m.str());
  CHECK_FALSE(m.exact);
  CHECK(m.peak_bytes >= n * n * 8);
}

TEST_CASE("cond and switch: bad input is a clear error") {
  const std::vector<Array> x{Array::scalar(1.0)};
  const lax::Branch same = [](std::span<const Array> o) { return std::vector<Array>{o[0]}; };
  const lax::Branch as_f32 = [](std::span<const Array> o) {
    return std::vector<Array>{astype(o[0], DType::f32)};
  };
  CHECK_THROWS_WITH_AS(lax::cond(Array::full(Shape{2}, 1.0, DType::f64), same, same, x),
                       doctest::Contains("the predicate must be a scalar, got f64[2]"), ValueError);
  CHECK_THROWS_WITH_AS(lax::cond(Array::scalar(true), same, as_f32, x),
                       doctest::Contains("branch 0 returns (f32[]) but branch 1 returns (f64[])"),
                       ValueError);
  const lax::Branch one[] = {same};
  CHECK_THROWS_WITH_AS(lax::switch_(Array::scalar(1.0), one, x),
                       doctest::Contains("the index must be an integer scalar, got f64[]"),
                       ValueError);
  CHECK_THROWS_WITH_AS(lax::switch_(Array::scalar(std::int32_t{0}), {}, x),
                       doctest::Contains("no branches"), ValueError);
}
