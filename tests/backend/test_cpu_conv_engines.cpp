// float32 convolutions on the CPU's two engines (include/flaxpp/backend/cpu.hpp): oneDNN's
// convolution primitives and im2col + the BLAS agree with the float64 convolution, forward and
// both cotangents, over strides, dilations, padding (SAME, VALID with windows that miss the last
// rows, negative, asymmetric), layouts, one to three spatial axes and feature groups. Under oneDNN the
// convolutions JAX's transpose rules write are recognised as its backward passes
// (src/backend/conv_library.hpp): the test counts the passes that ran there. The arrays live
// on the CPU whatever the suite's default device.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "flaxpp/backend/cpu.hpp"
#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax_convolution.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "harness/finite_diff.hpp"

using namespace flaxpp;

namespace {

// Random float32 values in [-1, 1) on the CPU.
Array random_cpu(const Shape& shape, unsigned seed) {
  return astype(testing::random_f64(shape, seed), DType::f32).to(Device::cpu());
}

struct Case {
  const char* name;
  Shape x, w;
  lax::ConvOptions options;
  // How many of the forward convolution and its two cotangents oneDNN runs.
  std::int64_t onednn_passes;
};

const lax::ConvDimensionNumbers kNhwc = lax::conv_dimension_numbers("NHWC", "HWIO", "NHWC");

std::vector<Case> cases() {
  return {
      {"SAME 3x3, channels last",
       {2, 8, 8, 3},
       {3, 3, 3, 5},
       {.padding = {{1, 1}, {1, 1}}, .dimension_numbers = kNhwc},
       3},
      {"VALID stride 2, windows that miss the last row and column",
       {2, 8, 9, 3},
       {3, 3, 3, 4},
       {.window_strides = {2, 2}, .dimension_numbers = kNhwc},
       3},
      {"SAME stride 2 with kernel dilation",
       {1, 7, 7, 2},
       {3, 3, 2, 3},
       {.window_strides = {2, 2},
        .padding = {{2, 2}, {2, 2}},
        .rhs_dilation = {2, 2},
        .dimension_numbers = kNhwc},
       3},
      {"negative high padding: no window reaches the last rows (a view of x)",
       {2, 9, 8, 3},
       {3, 3, 3, 4},
       {.window_strides = {2, 1}, .padding = {{0, -3}, {1, 1}}, .dimension_numbers = kNhwc},
       3},
      {"channels first, asymmetric padding, strides (1, 2)",
       {2, 3, 6, 7},
       {4, 3, 2, 3},
       {.window_strides = {1, 2}, .padding = {{1, 0}, {2, 1}}},
       3},
      {"one spatial axis, stride 3",
       {2, 11, 3},
       {4, 3, 5},
       {.window_strides = {3},
        .padding = {{1, 1}},
        .dimension_numbers = lax::conv_dimension_numbers("NWC", "WIO", "NWC")},
       3},
      {"three spatial axes",
       {1, 4, 5, 3, 2},
       {2, 2, 2, 2, 3},
       {.padding = {{0, 1}, {1, 0}, {0, 0}},
        .dimension_numbers = lax::conv_dimension_numbers("NDHWC", "DHWIO", "NDHWC")},
       3},
      // A grouped convolution's lhs cotangent at stride 1 is a grouped convolution again (of the
      // regrouped, reversed kernel); its rhs cotangent has batch groups, which no library pass
      // describes, and runs as im2col.
      {"feature groups",
       {2, 6, 6, 4},
       {3, 3, 2, 6},
       {.padding = {{1, 1}, {1, 1}}, .dimension_numbers = kNhwc, .feature_group_count = 2},
       2},
  };
}

// The convolution's value and both cotangents for a fixed output cotangent.
std::vector<Array> conv_and_cotangents(const Case& c, const Array& x, const Array& w,
                                       const Array& g) {
  const auto [y, back] = vjp(
      [&](const Array& a, const Array& b) { return lax::conv_general_dilated(a, b, c.options); }, x,
      w);
  const auto [dx, dw] = back(g);
  return {y, dx, dw};
}

}  // namespace

TEST_CASE(
    "cpu conv engines: oneDNN's passes and im2col match the float64 convolution and its "
    "cotangents") {
  const cpu::GemmEngineGuard guard;
  std::vector<cpu::GemmEngine> engines = {cpu::GemmEngine::blas};
  if (cpu::has_onednn()) engines.push_back(cpu::GemmEngine::onednn);
  unsigned seed = 1;
  for (const Case& c : cases()) {
    CAPTURE(std::string(c.name));
    const Array x = random_cpu(c.x, seed++), w = random_cpu(c.w, seed++);
    const Array y_shape_probe = lax::conv_general_dilated(x, w, c.options);
    const Array g = random_cpu(y_shape_probe.shape(), seed++);
    const std::vector<Array> exact =
        conv_and_cotangents(c, astype(x, DType::f64), astype(w, DType::f64), astype(g, DType::f64));
    for (const cpu::GemmEngine engine : engines) {
      CAPTURE(cpu::gemm_engine_name(engine));
      cpu::set_gemm_engine(engine);
      const std::int64_t runs = cpu::onednn_convolutions();
      const std::vector<Array> got = conv_and_cotangents(c, x, w, g);
      CHECK(cpu::onednn_convolutions() - runs ==
            (engine == cpu::GemmEngine::onednn ? c.onednn_passes : 0));
      for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);  // 0: the convolution, 1: its lhs cotangent, 2: its rhs cotangent
        REQUIRE(got[i].shape() == exact[i].shape());
        const std::vector<double> want = exact[i].to_vector<double>();
        const std::vector<double> have = astype(got[i], DType::f64).to_vector<double>();
        double worst = 0;
        for (std::size_t j = 0; j < want.size(); ++j)
          worst = std::max(worst, std::abs(have[j] - want[j]) / (1 + std::abs(want[j])));
        CHECK(worst <= 1e-5);
      }
    }
  }
}

TEST_CASE(
    "cpu conv engines: a transposed convolution (lhs dilation) runs as oneDNN's backward "
    "data pass") {
  if (!cpu::has_onednn()) return;
  const cpu::GemmEngineGuard guard;
  const Array g = random_cpu(Shape{2, 4, 5, 3}, 40), w = random_cpu(Shape{3, 3, 3, 6}, 41);
  const lax::ConvOptions options{
      .padding = {{2, 2}, {1, 2}}, .lhs_dilation = {2, 2}, .dimension_numbers = kNhwc};
  const std::vector<double> exact =
      lax::conv_general_dilated(astype(g, DType::f64), astype(w, DType::f64), options)
          .to_vector<double>();
  cpu::set_gemm_engine(cpu::GemmEngine::onednn);
  const std::int64_t runs = cpu::onednn_convolutions();
  const std::vector<double> got =
      astype(lax::conv_general_dilated(g, w, options), DType::f64).to_vector<double>();
  CHECK(cpu::onednn_convolutions() == runs + 1);
  REQUIRE(got.size() == exact.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    CHECK(std::abs(got[i] - exact[i]) <= 1e-5 * (1 + std::abs(exact[i])));
}
