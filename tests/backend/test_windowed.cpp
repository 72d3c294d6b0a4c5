// conv_general_dilated, reduce_window_sum / reduce_window_max and select_and_scatter_add, and
// Flax's Conv, max_pool and avg_pool, on the default device (ctest reruns the suite on CUDA):
// values against direct loops written here, layouts against each other, shape rules that say
// what they expected, every VJP (strides, padding of both signs, both dilations, feature and
// batch groups, one to three spatial axes) against float64 central differences, and what the
// remat policies save of a convolution. Real-Flax values are in tests/refs/cnn.json.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/lax_convolution.hpp"
#include "flaxpp/ir/lax_windowed.hpp"
#include "flaxpp/nn/conv.hpp"
#include "flaxpp/nn/pooling.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/vmap.hpp"
#include "harness/finite_diff.hpp"

using namespace flaxpp;
using testing::check_grad;
using testing::random_f64;

namespace {

using Axes = std::vector<std::int64_t>;
namespace cp = checkpoint_policies;

std::vector<double> f64_values(const Array& a) {
  return astype(a.to(Device::cpu()), DType::f64).to_vector<double>();
}

Array on_device(const Array& a) {
  return a.to(default_device());
}

// A direct NCHW / OIHW convolution with strides and padding (no dilation, no groups).
std::vector<double> direct_conv(const std::vector<double>& x, const Axes& xs,
                                const std::vector<double>& w, const Axes& ws, const Axes& strides,
                                const lax::Padding& pad, Axes& out_shape) {
  const std::int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], o = ws[0], kh = ws[2], kw = ws[3];
  const std::int64_t oh = (h + pad[0].first + pad[0].second - kh) / strides[0] + 1;
  const std::int64_t ow = (wd + pad[1].first + pad[1].second - kw) / strides[1] + 1;
  out_shape = {n, o, oh, ow};
  std::vector<double> y(static_cast<std::size_t>(n * o * oh * ow), 0.0);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t f = 0; f < o; ++f)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          double acc = 0;
          for (std::int64_t ch = 0; ch < c; ++ch)
            for (std::int64_t p = 0; p < kh; ++p)
              for (std::int64_t q = 0; q < kw; ++q) {
                const std::int64_t r = i * strides[0] + p - pad[0].first;
                const std::int64_t s = j * strides[1] + q - pad[1].first;
                if (r < 0 || r >= h || s < 0 || s >= wd) continue;
                acc += x[static_cast<std::size_t>(((b * c + ch) * h + r) * wd + s)] *
                       w[static_cast<std::size_t>(((f * c + ch) * kh + p) * kw + q)];
              }
          y[static_cast<std::size_t>(((b * o + f) * oh + i) * ow + j)] = acc;
        }
  return y;
}

void check_values(const std::vector<double>& got, const std::vector<double>& want,
                  double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element ", i);
    CHECK(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

}  // namespace

TEST_CASE("conv_general_dilated: values of a strided, padded convolution (lax's default layout)") {
  const Array x = random_f64(Shape{2, 3, 6, 5}, 1), w = random_f64(Shape{4, 3, 3, 2}, 2);
  const lax::Padding pad{{1, 2}, {0, 1}};
  const Axes strides{2, 1};
  Axes shape;
  const std::vector<double> want =
      direct_conv(x.to_vector<double>(), x.shape().dims(), w.to_vector<double>(), w.shape().dims(),
                  strides, pad, shape);
  const Array y = lax::conv_general_dilated(on_device(x), on_device(w),
                                            {.window_strides = strides, .padding = pad});
  CHECK(y.shape() == Shape(shape));
  check_values(f64_values(y), want);
}

TEST_CASE("conv_general_dilated: channels-last layouts give the channels-first result") {
  const Array x = random_f64(Shape{2, 3, 7, 6}, 3), w = random_f64(Shape{5, 3, 3, 3}, 4);
  const lax::ConvOptions first{.window_strides = {2, 2},
                               .padding = {{1, 1}, {2, 0}},
                               .lhs_dilation = {1, 2},
                               .rhs_dilation = {2, 1}};
  lax::ConvOptions last = first;
  last.dimension_numbers = lax::conv_dimension_numbers("NHWC", "HWIO", "NHWC");
  CHECK(last.dimension_numbers.lhs_spec == Axes{0, 3, 1, 2});
  CHECK(last.dimension_numbers.rhs_spec == Axes{3, 2, 0, 1});
  const Array want = lax::conv_general_dilated(on_device(x), on_device(w), first);
  const Array got = lax::conv_general_dilated(on_device(lax::transpose(x, {0, 2, 3, 1})),
                                              on_device(lax::transpose(w, {2, 3, 1, 0})), last);
  check_values(f64_values(lax::transpose(got, {0, 3, 1, 2})), f64_values(want));
}

TEST_CASE("conv_general_dilated: feature groups convolve each slice of channels with its kernels") {
  const Array x = random_f64(Shape{1, 4, 5, 5}, 5), w = random_f64(Shape{6, 2, 3, 3}, 6);
  const Array y = lax::conv_general_dilated(
      on_device(x), on_device(w), {.padding = {{1, 1}, {1, 1}}, .feature_group_count = 2});
  const lax::ConvOptions plain{.padding = {{1, 1}, {1, 1}}};
  for (std::int64_t g = 0; g < 2; ++g) {
    const Array xs = lax::slice(x, {0, 2 * g, 0, 0}, {1, 2 * g + 2, 5, 5});
    const Array ws = lax::slice(w, {3 * g, 0, 0, 0}, {3 * g + 3, 2, 3, 3});
    const Array part = lax::slice(y, {0, 3 * g, 0, 0}, {1, 3 * g + 3, 5, 5});
    check_values(f64_values(part),
                 f64_values(lax::conv_general_dilated(on_device(xs), on_device(ws), plain)));
  }
}

TEST_CASE("conv_general_dilated: batch groups give output feature group g batch slice g") {
  const Array x = random_f64(Shape{6, 2, 5}, 7), w = random_f64(Shape{6, 2, 3}, 8);
  const Array y = lax::conv_general_dilated(on_device(x), on_device(w), {.batch_group_count = 3});
  REQUIRE(y.shape() == Shape{2, 6, 3});
  for (std::int64_t g = 0; g < 3; ++g) {
    const Array xs = lax::slice(x, {2 * g, 0, 0}, {2 * g + 2, 2, 5});
    const Array ws = lax::slice(w, {2 * g, 0, 0}, {2 * g + 2, 2, 3});
    check_values(f64_values(lax::slice(y, {0, 2 * g, 0}, {2, 2 * g + 2, 3})),
                 f64_values(lax::conv_general_dilated(on_device(xs), on_device(ws))));
  }
}

TEST_CASE("conv_general_dilated: VJPs against float64 finite differences") {
  struct Case {
    const char* name;
    Shape x, w;
    lax::ConvOptions options;
  };
  const std::vector<Case> cases = {
      {"strided, padded",
       {2, 3, 6, 5},
       {4, 3, 3, 2},
       {.window_strides = {2, 1}, .padding = {{1, 2}, {0, 1}}}},
      {"both dilations, negative padding",
       {1, 2, 7, 6},
       {3, 2, 2, 3},
       {.window_strides = {1, 2},
        .padding = {{-1, 1}, {2, -1}},
        .lhs_dilation = {2, 1},
        .rhs_dilation = {1, 2}}},
      {"feature groups",
       {2, 4, 5, 4},
       {6, 2, 3, 2},
       {.window_strides = {2, 1}, .padding = {{1, 1}, {0, 1}}, .feature_group_count = 2}},
      {"batch groups", {4, 3, 6}, {4, 3, 2}, {.window_strides = {2}, .batch_group_count = 2}},
      {"channels last, strided",
       {2, 5, 6, 3},
       {3, 2, 3, 4},
       {.window_strides = {2, 2},
        .padding = {{1, 1}, {1, 0}},
        .dimension_numbers = lax::conv_dimension_numbers("NHWC", "HWIO", "NHWC")}},
      {"one spatial axis", {3, 2, 7}, {2, 2, 3}, {.padding = {{2, 0}}, .rhs_dilation = {2}}},
      {"three spatial axes",
       {1, 2, 4, 3, 3},
       {2, 2, 2, 2, 2},
       {.window_strides = {2, 1, 1}, .padding = {{0, 1}, {1, 0}, {0, 0}}}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    check_grad(
        [&](std::span<const Array> a) {
          return std::vector<Array>{lax::conv_general_dilated(a[0], a[1], c.options)};
        },
        {random_f64(c.x, 11), random_f64(c.w, 12)});
  }
}

TEST_CASE("conv_general_dilated: shape errors say what was expected") {
  const Array x = random_f64(Shape{1, 4, 5, 5}, 1), w = random_f64(Shape{6, 3, 3, 3}, 2);
  CHECK_THROWS_WITH_AS(lax::conv_general_dilated(x, w, {.feature_group_count = 2}),
                       doctest::Contains("the rhs's input feature axis must have 2"), ValueError);
  CHECK_THROWS_WITH_AS(lax::conv_general_dilated(x, random_f64(Shape{6, 4, 3}, 3)),
                       doctest::Contains("one rank"), ValueError);
  CHECK_THROWS_WITH_AS(lax::conv_general_dilated(x, random_f64(Shape{6, 4, 3, 3}, 3),
                                                 {.padding = {{-6, 0}, {0, 0}}}),
                       doctest::Contains("negative padding"), ValueError);
  CHECK_THROWS_WITH_AS(lax::padtype_to_pads({5}, {3}, {1}, "FULL"),
                       doctest::Contains("\"SAME\", \"SAME_LOWER\" or \"VALID\""), ValueError);
}

TEST_CASE("padtype_to_pads: SAME puts the odd element last, SAME_LOWER first, as jax.lax") {
  CHECK(lax::padtype_to_pads({5, 6}, {3, 2}, {2, 2}, "SAME") == lax::Padding{{1, 1}, {0, 0}});
  CHECK(lax::padtype_to_pads({6}, {4}, {1}, "SAME") == lax::Padding{{1, 2}});
  CHECK(lax::padtype_to_pads({6}, {4}, {1}, "SAME_LOWER") == lax::Padding{{2, 1}});
  CHECK(lax::padtype_to_pads({6}, {4}, {1}, "VALID") == lax::Padding{{0, 0}});
}

TEST_CASE("reduce_window: sums and maxima over padded, strided, dilated windows") {
  // x = [0, 1, ..., 5] as (1, 6); windows of 3 with stride 2, padding (1, 1).
  std::vector<double> v{0, 1, 2, 3, 4, 5};
  const Array x = on_device(Array::from_vector(v, Shape{1, 6}));
  const lax::WindowOptions w{
      .window_dimensions = {1, 3}, .window_strides = {1, 2}, .padding = {{0, 0}, {1, 1}}};
  CHECK(f64_values(lax::reduce_window_sum(x, w)) == std::vector<double>{1, 6, 12});
  CHECK(f64_values(lax::reduce_window_max(x, w)) == std::vector<double>{1, 3, 5});
  // A base dilation of 2 makes [0, _, 1, _, 2, ...]; a window of 2 dilated by 2 reads two
  // elements 2 apart.
  const lax::WindowOptions dilated{
      .window_dimensions = {1, 2}, .base_dilation = {1, 2}, .window_dilation = {1, 2}};
  CHECK(f64_values(lax::reduce_window_sum(x, dilated)) ==
        std::vector<double>{1, 0, 3, 0, 5, 0, 7, 0, 9});
  // Padding counts as -inf for the max: a window wholly in padding gives -inf.
  const Array m = lax::reduce_window_max(
      x, {.window_dimensions = {1, 2}, .window_strides = {1, 1}, .padding = {{0, 0}, {3, 0}}});
  CHECK(f64_values(m)[0] == -std::numeric_limits<double>::infinity());
}

TEST_CASE("reduce_window: VJPs against float64 finite differences") {
  const Array x = random_f64(Shape{2, 7, 6}, 21);
  const std::vector<lax::WindowOptions> windows = {
      {.window_dimensions = {1, 3, 2}, .window_strides = {1, 2, 2}},
      {.window_dimensions = {2, 2, 3},
       .window_strides = {1, 1, 2},
       .padding = {{0, 1}, {1, 1}, {2, 0}}},
      {.window_dimensions = {1, 2, 2},
       .window_strides = {1, 3, 1},
       .padding = {{0, 0}, {1, -1}, {0, 2}},
       .base_dilation = {1, 2, 1},
       .window_dilation = {1, 1, 2}},
  };
  for (std::size_t i = 0; i < windows.size(); ++i) {
    INFO("window ", i);
    check_grad(
        [&](std::span<const Array> a) {
          return std::vector<Array>{lax::reduce_window_sum(a[0], windows[i])};
        },
        {x});
    if (windows[i].base_dilation.empty())
      check_grad(
          [&](std::span<const Array> a) {
            return std::vector<Array>{lax::reduce_window_max(a[0], windows[i])};
          },
          {x}, 1e-7);
  }
  CHECK_THROWS_WITH_AS(
      grad([&](const Array& v) { return sum(lax::reduce_window_max(v, windows[2])); })(x),
      doctest::Contains("dilated max window"), ValueError);
}

TEST_CASE("select_and_scatter_add: each window's source goes to its first largest element") {
  // Windows of 2 with stride 1 over [1, 3, 3, 2]: maxima at 1, 1 (the first of the tie), 2.
  const Array operand = on_device(Array::from_vector(std::vector<double>{1, 3, 3, 2}, Shape{4}));
  const Array source = on_device(Array::from_vector(std::vector<double>{10, 20, 40}, Shape{3}));
  const Array y = lax::select_and_scatter_add(source, operand, {.window_dimensions = {2}});
  CHECK(f64_values(y) == std::vector<double>{0, 30, 40, 0});
  CHECK_THROWS_WITH_AS(lax::select_and_scatter_add(lax::slice(source, {0}, {2}), operand,
                                                   {.window_dimensions = {2}}),
                       doctest::Contains("the source must be"), ValueError);
}

TEST_CASE("nn::max_pool and nn::avg_pool: Flax's windows over the spatial axes") {
  const Array x = random_f64(Shape{2, 4, 4, 3}, 31);
  const Array m = nn::max_pool(on_device(x), {2, 2}, {.strides = {2, 2}});
  const Array a = nn::avg_pool(on_device(x), {2, 2}, {.strides = {2, 2}});
  REQUIRE(m.shape() == Shape{2, 2, 2, 3});
  const std::vector<double> xs = x.to_vector<double>(), ms = f64_values(m), as = f64_values(a);
  const auto at = [&](std::int64_t b, std::int64_t i, std::int64_t j, std::int64_t c) {
    return xs[static_cast<std::size_t>(((b * 4 + i) * 4 + j) * 3 + c)];
  };
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 2; ++j)
        for (std::int64_t c = 0; c < 3; ++c) {
          const double e[] = {at(b, 2 * i, 2 * j, c), at(b, 2 * i + 1, 2 * j, c),
                              at(b, 2 * i, 2 * j + 1, c), at(b, 2 * i + 1, 2 * j + 1, c)};
          const auto k = static_cast<std::size_t>(((b * 2 + i) * 2 + j) * 3 + c);
          CHECK(ms[k] == std::max({e[0], e[1], e[2], e[3]}));
          CHECK(std::abs(as[k] - (e[0] + e[1] + e[2] + e[3]) / 4) < 1e-12);
        }
  // No batch axis: one is added and removed. count_include_pad: padding counts in the mean.
  const Array single = lax::slice(x, {0, 0, 0, 0}, {1, 4, 4, 3});
  const Array unbatched = lax::reshape(single, Shape{4, 4, 3});
  CHECK(f64_values(nn::avg_pool(on_device(unbatched), {3, 3}, {.padding = std::string("SAME")})) ==
        f64_values(nn::avg_pool(on_device(single), {3, 3}, {.padding = std::string("SAME")})));
  CHECK_THROWS_WITH_AS(nn::max_pool(x, {2, 2, 2, 2}),
                       doctest::Contains("needs an input of at least 5"), ValueError);
}

TEST_CASE("nn::Conv: Flax's kernel shape and errors that name the module") {
  const Array x = astype(random_f64(Shape{2, 5, 5, 4}, 41), DType::f32);
  const nn::Model model(nn::Conv{.features = 6, .kernel_size = {3, 3}, .feature_group_count = 2});
  const nn::Variables v = model.init(random::key(0), x);
  CHECK(v["params"]["kernel"].array().shape() == Shape{3, 3, 2, 6});
  CHECK(v["params"]["bias"].array().shape() == Shape{6});
  CHECK(model.apply(v, x).shape() == Shape{2, 5, 5, 6});
  // Several batch axes are flattened and restored.
  const Array many = lax::reshape(x, Shape{1, 2, 5, 5, 4});
  CHECK(model.apply(v, many).shape() == Shape{1, 2, 5, 5, 6});
  const nn::Model bad(nn::Conv{.features = 4, .kernel_size = {3, 3}, .feature_group_count = 3});
  CHECK_THROWS_WITH_AS(bad.init(random::key(0), x),
                       doctest::Contains("Conv at (root): feature_group_count 3 must divide"),
                       ValueError);
  // CIRCULAR wraps the input around: the output keeps the input's size (values: cnn.json).
  const nn::Model circular(
      nn::Conv{.features = 4, .kernel_size = {3, 2}, .padding = std::string("CIRCULAR")});
  CHECK(circular.apply(circular.init(random::key(0), x), x).shape() == Shape{2, 5, 5, 4});
  const nn::Model causal(
      nn::Conv{.features = 4, .kernel_size = {3, 3}, .padding = std::string("CAUSAL")});
  CHECK_THROWS_WITH_AS(causal.init(random::key(0), x),
                       doctest::Contains("\"CAUSAL\" is only implemented for one spatial axis"),
                       ValueError);
  const nn::Model transposed(
      nn::ConvTranspose{.features = 4, .kernel_size = {3, 3}, .padding = std::string("CIRCULAR")});
  CHECK_THROWS_WITH_AS(transposed.init(random::key(0), x), doctest::Contains("not supported here"),
                       ValueError);
}

TEST_CASE(
    "checkpoint: dots_saveable saves a convolution's output, dots_with_no_batch_dims does "
    "not (JAX's DotsSaveable)") {
  const Array x = random_f64(Shape{2, 3, 5, 5}, 51), w = random_f64(Shape{4, 3, 3, 3}, 52);
  auto fn = [](std::span<const Array> v) {
    return std::vector<Array>{
        sum(square(relu(lax::conv_general_dilated(v[0], v[1], {.padding = {{1, 1}, {1, 1}}}))))};
  };
  const std::vector<Array> args{x, w};
  const auto dots = saved_residuals(checkpoint(fn, cp::dots_saveable()), args);
  const auto no_batch =
      saved_residuals(checkpoint(fn, cp::dots_with_no_batch_dims_saveable()), args);
  CHECK(no_batch.size() == 2);  // the arguments
  REQUIRE(dots.size() == 3);    // and the convolution's output
  CHECK(dots[2].str() == "f64[2,4,5,5] output of conv_general_dilated");
}

TEST_CASE("conv and pooling under jit: the eager step's bits") {
  const Array x = on_device(astype(random_f64(Shape{2, 6, 6, 3}, 61), DType::f32));
  const nn::Model model(nn::Conv{.features = 4, .kernel_size = {3, 3}, .strides = {2, 2}});
  const Tree params = model.init(random::key(1), x)["params"];
  const auto loss = [&](const Tree& p, const Array& v) {
    const Array y = model.apply(nn::Variables{{"params", p}}, v);
    return sum(square(nn::avg_pool(relu(y), {2, 2}) + nn::max_pool(y, {2, 2})));
  };
  const auto step = [&](const Tree& p, const Array& v) {
    auto [value, grads] = value_and_grad(loss)(p, v);
    return Tree{{"loss", value}, {"grads", grads}};
  };
  const Tree eager = step(params, x);
  const Tree jitted = jit(step)(params, x);
  const auto e = eager.flatten(), j = jitted.flatten();
  REQUIRE(e.size() == j.size());
  for (std::size_t i = 0; i < e.size(); ++i) {
    INFO(e[i].first);
    CHECK(f64_values(e[i].second) == f64_values(j[i].second));
  }
}

TEST_CASE("conv_transpose: with transpose_kernel, the input gradient of the forward convolution") {
  // x (2, 6, 8, 3) convolved with w (3, 3, 3, 4) at strides 2: y (2, 3, 4, 4); the gradient of
  // <y, g> with respect to x is conv_transpose(g, w, strides, padding, transpose_kernel).
  const Array x = random_f64(Shape{2, 6, 8, 3}, 71), w = random_f64(Shape{3, 3, 3, 4}, 72);
  const lax::ConvDimensionNumbers dn = lax::conv_dimension_numbers("NHWC", "HWIO", "NHWC");
  for (const char* padding : {"SAME", "VALID"}) {
    INFO(padding);
    const lax::Padding pads = lax::padtype_to_pads({6, 8}, {3, 3}, {2, 2}, padding);
    const auto [y, back] = vjp(
        [&](const Array& v) {
          return lax::conv_general_dilated(
              v, w, {.window_strides = {2, 2}, .padding = pads, .dimension_numbers = dn});
        },
        x);
    const Array g = random_f64(y.shape(), 73);
    const Array want = std::get<0>(back(g));
    const Array got = lax::conv_transpose(g, w, {2, 2}, std::string(padding), {}, dn, true);
    if (std::string(padding) == "SAME") {
      REQUIRE(got.shape() == want.shape());
      check_values(f64_values(got), f64_values(want));
    } else {
      // VALID drops the last row and column the forward windows never reached.
      REQUIRE(got.shape() == Shape{2, 5, 7, 3});
      check_values(f64_values(got), f64_values(lax::slice(want, {0, 0, 0, 0}, {2, 5, 7, 3})));
    }
  }
  CHECK_THROWS_WITH_AS(lax::conv_transpose(x, w, {2}, std::string("SAME")),
                       doctest::Contains("need one entry per spatial axis (2)"), ValueError);
  const nn::Model model(nn::ConvTranspose{.features = 5, .kernel_size = {3, 2}, .strides = {2, 2}});
  const nn::Variables v = model.init(random::key(0), astype(x, DType::f32));
  CHECK(v["params"]["kernel"].array().shape() == Shape{3, 2, 3, 5});
  CHECK(model.apply(v, astype(x, DType::f32)).shape() == Shape{2, 12, 16, 5});
}

TEST_CASE("vmap of convolutions and windows: each example's result (JAX's batching rules)") {
  // vmap(f) against f on each example alone, stacked.
  const auto check = [](const ArrayFn& f, const std::vector<Array>& args,
                        const std::vector<MapAxis>& in_axes, std::int64_t size) {
    const std::vector<Array> got = vmap(f, {.in_axes = in_axes})(args);
    for (std::int64_t b = 0; b < size; ++b) {
      std::vector<Array> one;
      for (std::size_t i = 0; i < args.size(); ++i) {
        if (in_axes[i] == not_mapped) {
          one.push_back(args[i]);
          continue;
        }
        Axes start(static_cast<std::size_t>(args[i].rank()), 0), limit = args[i].shape().dims();
        start[0] = b;
        limit[0] = b + 1;
        Axes example_dims(limit.begin() + 1, limit.end());
        one.push_back(lax::reshape(lax::slice(args[i], start, limit), Shape(example_dims)));
      }
      const Array want = f(one)[0];
      Axes start(static_cast<std::size_t>(got[0].rank()), 0), limit = got[0].shape().dims();
      start[0] = b;
      limit[0] = b + 1;
      CAPTURE(b);
      check_values(f64_values(lax::slice(got[0], start, limit)), f64_values(want));
    }
  };
  const lax::ConvDimensionNumbers nhwc = lax::conv_dimension_numbers("NHWC", "HWIO", "NHWC");
  const Array xs = random_f64(Shape{3, 2, 5, 4, 4}, 81), x = random_f64(Shape{2, 5, 4, 4}, 83);
  for (const std::int64_t groups : {1, 2}) {
    INFO("feature groups ", groups);
    // HWIO kernels of 4 / groups input features: one per example, and one shared.
    const Array ws = random_f64(Shape{3, 3, 2, 4 / groups, 6}, 82);
    const Array w = random_f64(Shape{3, 2, 4 / groups, 6}, 84);
    const auto f = [&, groups](std::span<const Array> v) {
      return std::vector<Array>{lax::conv_general_dilated(v[0], v[1],
                                                          {.window_strides = {2, 1},
                                                           .padding = {{1, 1}, {0, 1}},
                                                           .dimension_numbers = nhwc,
                                                           .feature_group_count = groups})};
    };
    check(f, {xs, w}, {0, not_mapped}, 3);
    check(f, {x, ws}, {not_mapped, 0}, 3);
    check(f, {xs, ws}, {0, 0}, 3);
  }
  // Batch groups (a kernel gradient's convolution) with both operands batched.
  const auto bg = [](std::span<const Array> v) {
    return std::vector<Array>{lax::conv_general_dilated(v[0], v[1], {.batch_group_count = 2})};
  };
  check(bg, {random_f64(Shape{2, 4, 3, 6}, 86), random_f64(Shape{2, 4, 3, 2}, 87)}, {0, 0}, 2);
  check(bg, {random_f64(Shape{2, 4, 3, 6}, 88), random_f64(Shape{4, 3, 2}, 89)}, {0, not_mapped},
        2);
  // Pools and their gradients, per example.
  const auto pools = [](std::span<const Array> v) {
    const auto pooled = [](const Array& a) {
      return sum(square(nn::max_pool(a, {2, 2}, {.strides = {2, 1}}))) +
             sum(nn::avg_pool(a, {3, 2}, {.padding = std::string("SAME")}));
    };
    return std::vector<Array>{grad(pooled)(v[0])};
  };
  check(pools, {random_f64(Shape{3, 2, 5, 4, 3}, 90)}, {0}, 3);
  // A per-example gradient of a convolution's kernel.
  const auto kernel_grad = [&](std::span<const Array> v) {
    return std::vector<Array>{grad([&](const Array& k) {
      return sum(square(lax::conv_general_dilated(
          v[0], k,
          {.window_strides = {2, 2}, .padding = {{1, 1}, {1, 1}}, .dimension_numbers = nhwc})));
    })(random_f64(Shape{3, 2, 4, 6}, 91))};
  };
  check(kernel_grad, {xs}, {0}, 3);
}
