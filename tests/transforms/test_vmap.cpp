// vmap: every batching rule against the function applied to each example alone (a loop over
// slices, stacked), in float64 on the default device (ctest reruns the suite on CUDA); the
// paths a rule takes by which operands are batched; its composition with grad, jit and
// checkpoint; and the errors for inputs it cannot map.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/nn/vmap.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/ops/slicing.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/cond.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/scan.hpp"
#include "flaxpp/transforms/vmap.hpp"
#include "harness/errors.hpp"
#include "harness/finite_diff.hpp"

using namespace flaxpp;
using testing::random_f64;

namespace {

Array on_device(const Array& a) {
  return a.to(default_device());
}
Array draw(const Shape& shape, unsigned seed) {
  return on_device(random_f64(shape, seed));
}
Array ints(std::vector<std::int32_t> v, Shape shape) {
  return on_device(Array::from_vector(v, std::move(shape)));
}

std::vector<double> values(const Array& a) {
  return astype(a.to(Device::cpu()), DType::f64).to_vector<double>();
}

// Example b of x mapped along `axis`.
Array example(const Array& x, MapAxis axis, std::int64_t b) {
  if (!axis) return x;
  const std::int64_t a = *axis < 0 ? *axis + x.rank() : *axis;
  std::vector<Range> ranges(static_cast<std::size_t>(a) + 1);
  ranges.back() = Range{b, b + 1};
  std::vector<std::int64_t> dims = x.shape().dims();
  dims.erase(dims.begin() + a);
  return reshape(slice(x, ranges), dims);
}

// vmap(f) against f on each example, its results stacked along axis 0 (bit for bit: every rule
// computes each example's values with the same operations).
void check_vmap(const ArrayFn& f, const std::vector<Array>& args, std::vector<MapAxis> in_axes,
                std::int64_t size) {
  const std::vector<Array> got = vmap(f, {.in_axes = in_axes})(args);
  for (std::int64_t b = 0; b < size; ++b) {
    std::vector<Array> one;
    for (std::size_t i = 0; i < args.size(); ++i)
      one.push_back(example(args[i], in_axes[i], b));
    const std::vector<Array> want = f(one);
    REQUIRE(want.size() == got.size());
    for (std::size_t k = 0; k < want.size(); ++k) {
      CAPTURE(k);
      CAPTURE(b);
      REQUIRE(got[k].shape()[0] == size);
      const Array row = example(got[k], 0, b);
      REQUIRE(row.aval() == want[k].aval());
      CHECK(values(row) == values(want[k]));
    }
  }
}

// The message of the ValueError `f` throws, checked to contain each of `parts`.
template <class F>
void check_error(F&& f, std::initializer_list<const char*> parts) {
  std::string message;
  try {
    f();
  } catch (const ValueError& e) {
    message = e.what();
  }
  REQUIRE_MESSAGE(!message.empty(), "expected a flaxpp::ValueError");
  for (const char* part : parts)
    CHECK_MESSAGE(testing::has(message, part), message);
}

}  // namespace

TEST_CASE("vmap: elementwise, reductions and structure, against each example alone") {
  const Array xs = draw({3, 4, 5}, 1), y_shared = draw({4, 5}, 2), ss = draw({3}, 3);
  const ArrayFn f = [](std::span<const Array> a) {
    const Array& x = a[0];
    const Array& y = a[1];
    const Array& s = a[2];
    const Array z = tanh(x * y + s) - lax::integer_pow(x, 3);
    return std::vector<Array>{sum(z, std::vector<std::int64_t>{1}),
                              lax::reduce_max(z, {0}),
                              transpose(reshape(z, {5, 4}), std::vector<std::int64_t>{1, 0}),
                              broadcast_to(s, {2, 4}),
                              where(lax::gt(x, y), x, y),
                              astype(lax::gt(x, s), DType::f64),
                              lax::stop_gradient(x) + checkpoint_name(y, "y")};
  };
  check_vmap(f, {xs, y_shared, ss}, {0, not_mapped, 0}, 3);
  // Mapped along other axes, or along the last one counted from the end.
  check_vmap(f, {transpose(xs, std::vector<std::int64_t>{1, 0, 2}), y_shared, ss},
             {1, not_mapped, 0}, 3);
  check_vmap(f, {xs, draw({4, 5, 3}, 4), ss}, {0, -1, 0}, 3);
}

TEST_CASE("vmap: dot_general with the lhs, the rhs or both batched, and with batch dims") {
  const auto dot = [](ir::DotDimensionNumbers d) {
    return ArrayFn([d](std::span<const Array> a) {
      return std::vector<Array>{lax::dot_general(a[0], a[1], d)};
    });
  };
  const ir::DotDimensionNumbers matmul{{1}, {0}, {}, {}}, batched{{2}, {1}, {0}, {0}};
  const Array a = draw({4, 2, 3}, 5), b = draw({4, 3, 5}, 6);
  check_vmap(dot(matmul), {a, b}, {0, 0}, 4);
  check_vmap(dot(matmul), {a, draw({3, 5}, 7)}, {0, not_mapped}, 4);
  check_vmap(dot(matmul), {draw({2, 3}, 8), b}, {not_mapped, 0}, 4);
  const Array c = draw({4, 6, 2, 3}, 9), e = draw({4, 6, 3, 5}, 10);
  check_vmap(dot(batched), {c, e}, {0, 0}, 4);
  check_vmap(dot(batched), {c, draw({6, 3, 5}, 11)}, {0, not_mapped}, 4);
  check_vmap(dot(batched), {draw({6, 2, 3}, 12), e}, {not_mapped, 0}, 4);
}

TEST_CASE("vmap: take and scatter_add with the table, the indices or both batched") {
  const ArrayFn gather = [](std::span<const Array> a) {
    return std::vector<Array>{lax::take(a[0], a[1])};
  };
  const ArrayFn scatter = [](std::span<const Array> a) {
    return std::vector<Array>{lax::scatter_add(a[0], a[1], a[2])};
  };
  const Array tables = draw({3, 5, 2}, 13), table = draw({5, 2}, 14);
  const Array index_rows = ints({0, 4, 4, 1, 2, 3, 0, 0, 1, 4, 3, 2}, {3, 4});
  const Array indices = ints({4, 0, 2, 2}, {4});
  check_vmap(gather, {table, index_rows}, {not_mapped, 0}, 3);
  check_vmap(gather, {tables, indices}, {0, not_mapped}, 3);
  check_vmap(gather, {tables, index_rows}, {0, 0}, 3);
  const Array updates = draw({3, 4, 2}, 15), update = draw({4, 2}, 16);
  check_vmap(scatter, {tables, indices, update}, {0, not_mapped, not_mapped}, 3);
  check_vmap(scatter, {table, indices, updates}, {not_mapped, not_mapped, 0}, 3);
  check_vmap(scatter, {table, index_rows, update}, {not_mapped, 0, not_mapped}, 3);
  check_vmap(scatter, {tables, index_rows, updates}, {0, 0, 0}, 3);
  // An index outside one example's table is refused, not read from the next example's.
  const Array past = ints({0, 1, 5, 2}, {2, 2});
  check_error(
      [&] {
        (void)vmap(gather, {.in_axes = {0, 0}})(std::vector<Array>{draw({2, 5, 2}, 17), past})[0]
            .to_vector<double>();
      },
      {"outside [0, 10)"});
}

TEST_CASE("vmap: slicing, padding and dynamic slices, with starts the same or per example") {
  const Array x = draw({3, 4, 6}, 18), value = draw({3}, 19);
  check_vmap(
      [](std::span<const Array> a) {
        const Array& e = a[0];
        const lax::PadConfig config[] = {{1, -1, 1}, {0, 2, 0}};
        return std::vector<Array>{lax::slice(e, {1, 0}, {4, 6}, {2, 3}),
                                  lax::rev(e, {1}),
                                  concatenate(std::vector<Array>{e, a[1] * e}, 1),
                                  lax::pad(e, a[2], config),
                                  cumsum(e, 1),
                                  argmax(e, 0),
                                  argsort(e, 1),
                                  sort(e, 0)};
      },
      {x, draw({4, 6}, 20), value}, {0, not_mapped, 0}, 3);
  const ArrayFn dynamic = [](std::span<const Array> a) {
    const Array starts[] = {a[1], a[2]};
    return std::vector<Array>{lax::dynamic_slice(a[0], starts, {2, 3}),
                              lax::dynamic_update_slice(a[0], a[3], starts)};
  };
  const auto start = [](std::vector<std::int32_t> v) {
    return ints(v, {static_cast<std::int64_t>(v.size())});
  };
  const Array zero = on_device(Array::scalar(std::int32_t{0}));
  const Array one = on_device(Array::scalar(std::int32_t{1}));
  // Starts past the end are clamped, negative ones counted from the end, as JAX places them.
  const Array rows = start({0, 3, -1}), cols = start({5, -4, 2});
  const Array update = draw({3, 2, 3}, 21);
  check_vmap(dynamic, {x, one, zero, update}, {0, not_mapped, not_mapped, 0}, 3);
  check_vmap(dynamic, {x, rows, cols, update}, {0, 0, 0, 0}, 3);
  check_vmap(dynamic, {draw({4, 6}, 22), rows, zero, update}, {not_mapped, 0, not_mapped, 0}, 3);
  // Written blocks keep their bits, -0.0 included.
  const Array negative_zero =
      on_device(astype(Array::from_vector(std::vector<double>(18, -0.0), {3, 2, 3}), DType::f64));
  const Array written =
      vmap(dynamic, {.in_axes = {0, 0, 0, 0}})(std::vector<Array>{x, rows, cols, negative_zero})[1];
  for (const double v :
       values(lax::dynamic_slice(written, std::vector<Array>{zero, zero, zero}, {1, 4, 6})))
    if (v == 0.0) CHECK(std::signbit(v));
}

TEST_CASE("vmap: layer_norm with the scale and bias the same for every example or per example") {
  const ArrayFn norm = [](std::span<const Array> a) {
    return std::vector<Array>{lax::layer_norm(a[0], a[1], a[2], 1e-6)};
  };
  const Array x = draw({3, 4, 5}, 23);
  check_vmap(norm, {x, draw({5}, 24), draw({5}, 25)}, {0, not_mapped, not_mapped}, 3);
  // Per-example scale and bias round once more than the fused formula.
  const Array scale = draw({3, 5}, 26), bias = draw({3, 5}, 27);
  const Array got = vmap(norm, {.in_axes = {0, 0, 0}})(std::vector<Array>{x, scale, bias})[0];
  for (std::int64_t b = 0; b < 3; ++b) {
    const auto row = values(example(got, 0, b));
    const auto want = values(
        norm(std::vector<Array>{example(x, 0, b), example(scale, 0, b), example(bias, 0, b)})[0]);
    for (std::size_t k = 0; k < want.size(); ++k)
      CHECK(row[k] == doctest::Approx(want[k]).epsilon(1e-14));
  }
}

TEST_CASE("vmap of grad gives per-example gradients; grad, jit and checkpoint compose with it") {
  const Array w = draw({4, 3}, 28), xs = draw({5, 4}, 29);
  const auto loss = [](const Array& wi, const Array& xi) {
    return sum(square(tanh(matmul(xi, wi))));
  };
  const Array per_example = vmap(grad(loss), {not_mapped, 0})(w, xs);
  CHECK(per_example.shape() == Shape{5, 4, 3});
  for (std::int64_t b = 0; b < 5; ++b)
    CHECK(values(example(per_example, 0, b)) == values(grad(loss)(w, example(xs, 0, b))));
  // The gradient of a batched loss is the sum of the per-example gradients.
  const Array total = grad([&](const Array& wt) {
    return sum(vmap([&](const Array& wi, const Array& xi) { return loss(wi, xi); },
                    {not_mapped, 0})(wt, xs));
  })(w);
  const auto want = values(sum(per_example, std::vector<std::int64_t>{0}));
  const auto got = values(total);
  for (std::size_t k = 0; k < want.size(); ++k)
    CHECK(got[k] == doctest::Approx(want[k]).epsilon(1e-12));
  // Under jit, and with a checkpointed region inside: the same values.
  const ArrayFn region = checkpoint(
      [](std::span<const Array> a) { return std::vector<Array>{tanh(matmul(a[1], a[0]))}; });
  const auto remat_loss = [&](const Array& wi, const Array& xi) {
    return sum(square(region(std::vector<Array>{wi, xi})[0]));
  };
  const auto jitted = jit([&](const Array& wj, const Array& xj) {
    return vmap(grad(remat_loss), {not_mapped, 0})(wj, xj);
  });
  CHECK(values(jitted(w, xs)) == values(per_example));
}

TEST_CASE("vmap of scan: carries batched from the start or made so by the body, xs, ys") {
  // The carry c starts the same for every example; the body adds the example's x to it, so it
  // becomes batched; d stays the same for every example; ys are per example.
  const ArrayFn looped = [](std::span<const Array> a) {
    const ScanResult r = scan(
        [&](std::span<const Array> c, std::span<const Array> x) {
          const Array next = tanh(c[0] * a[2] + x[0]);
          return ScanResult{{next, c[1] * 2.0}, {next * x[0], c[1]}};
        },
        std::vector<Array>{a[0], a[1]}, std::vector<Array>{a[3]});
    std::vector<Array> out = r.carry;
    out.insert(out.end(), r.ys.begin(), r.ys.end());
    return out;
  };
  const Array c0 = draw({2}, 41), d0 = draw({2}, 42), w = draw({3, 2}, 43);
  const Array xs = draw({3, 4, 2}, 44);  // per example: 4 steps of a 2-vector
  check_vmap(looped, {c0, d0, w, xs}, {not_mapped, not_mapped, 0, 0}, 3);
  check_vmap(looped, {draw({3, 2}, 45), d0, w, xs}, {0, not_mapped, 0, 0}, 3);
  // Mapped along the per-example steps' second axis.
  check_vmap(looped, {c0, d0, draw({2}, 46), transpose(xs, std::vector<std::int64_t>{1, 0, 2})},
             {not_mapped, not_mapped, not_mapped, 1}, 3);
}

TEST_CASE("nn::vmap: an ensemble of MLPs, member i the MLP of its parameters' row i") {
  const nn::MLP mlp{.features = {6, 3}};
  const auto ensemble = nn::vmap(mlp, {.axis_size = 4});
  const Array x = draw({2, 5}, 30);
  const nn::Variables v = ensemble.init(random::key(0), x);
  const Array y = ensemble.apply(v, x);
  CHECK(y.shape() == Shape{4, 2, 3});
  const Tree params = v["params"];
  CHECK(params["Dense_0"]["kernel"].array().shape() == Shape{4, 5, 6});
  const nn::Model alone(mlp);
  for (std::int64_t i = 0; i < 4; ++i) {
    const Tree mine = tree_map(params, [&](const Array& a) { return example(a, 0, i); });
    const auto want = values(alone.apply(nn::Variables{{"params", mine}}, x));
    const auto got = values(example(y, 0, i));
    for (std::size_t k = 0; k < want.size(); ++k)
      CHECK(got[k] == doctest::Approx(want[k]).epsilon(1e-12));
  }
  // Variables of another number of members are refused, naming the parameter.
  check_error([&] { (void)nn::vmap(mlp, {.axis_size = 3}).apply(v, x); },
              {"params/Dense_0/", "maps 3 members"});
}

TEST_CASE("vmap: what it cannot map is refused, saying what to do") {
  const ArrayFn f = [](std::span<const Array> a) { return std::vector<Array>{a[0] + a[1]}; };
  check_error(
      [&] {
        (void)vmap(f)(std::vector<Array>{draw({3, 2}, 31), draw({4, 2}, 32)});
      },
      {"mapped axes must have one length", "argument 1"});
  check_error(
      [&] {
        (void)vmap(f, {.in_axes = {not_mapped, not_mapped}})(
            std::vector<Array>{draw({2}, 33), draw({2}, 34)});
      },
      {"give axis_size"});
  check_error(
      [&] {
        (void)vmap(f, {.in_axes = {0, 0}, .out_axes = {not_mapped}})(
            std::vector<Array>{draw({3, 2}, 35), draw({3, 2}, 36)});
      },
      {"result 0 differs between examples"});
  check_error(
      [&] {
        (void)vmap(f, {.in_axes = {2, 0}})(std::vector<Array>{draw({3, 2}, 37), draw({3, 2}, 38)});
      },
      {"argument 0", "axis 2 does not exist"});
  // A primitive without a batching rule (a cond, for now) is named.
  const ArrayFn branching = [](std::span<const Array> a) {
    return lax::cond(
        lax::gt(sum(a[0]), lax::scalar(0, DType::f64)),
        [](std::span<const Array> x) { return std::vector<Array>{x[0] * 2.0}; },
        [](std::span<const Array> x) { return std::vector<Array>{-x[0]}; },
        std::vector<Array>{a[0]});
  };
  check_error(
      [&] {
        (void)vmap(branching)(std::vector<Array>{draw({3, 2}, 39)});
      },
      {"the primitive cond has no batching rule"});
}
