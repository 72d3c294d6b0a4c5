// CUDA paths the device-independent suites do not reach: bf16 and f16 products in every stored
// layout, empty products, cuDNN where the GPU machine's check requires it, and offload over
// several steps with no host read between them (pinned buffers reused while the GPU may still
// use them: the trigger of desk review F3).
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/lax_attention.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "harness/cuda_parity.hpp"
#include "harness/dot_cases.hpp"
#include "harness/remat_stack.hpp"
#include "src/backend/cuda/cuda_eval.hpp"

using namespace flaxpp;
using testing::kNoGpu;
using testing::random_f32;
using testing::values;
namespace cp = flaxpp::checkpoint_policies;

TEST_CASE("CUDA dot_general: bf16 and f16 products in every layout, 16-bit or f32 results" *
          doctest::skip(kNoGpu)) {
  unsigned seed = 300;
  for (const testing::DotCase& c : testing::dot_cases()) {
    CAPTURE(c.name);
    // Every axis 8 times longer (equal axes stay equal), so that cuBLAS's tiles see more than a
    // handful of values.
    auto scaled = [](const Shape& shape) {
      std::vector<std::int64_t> dims(shape.dims().begin(), shape.dims().end());
      for (std::int64_t& d : dims)
        d *= 8;
      return Shape(dims);
    };
    const Array lhs = random_f32(scaled(c.lhs), ++seed), rhs = random_f32(scaled(c.rhs), ++seed);
    for (const DType dtype : {DType::bf16, DType::f16}) {
      CAPTURE(dtype_name(dtype));
      const Array a = astype(lhs.to(Device::cuda(0)), dtype);
      const Array b = astype(rhs.to(Device::cuda(0)), dtype);
      // The float32 product of the rounded operands, on the CPU: products of 16-bit values are
      // exact in float32, so only the order of the sum (and the final rounding) differs.
      const Array want = lax::dot_general(astype(a, DType::f32).to(Device::cpu()),
                                          astype(b, DType::f32).to(Device::cpu()), c.dn);
      const std::vector<double> w = values(want);
      const std::vector<double> wide = values(lax::dot_general(a, b, c.dn, DType::f32));
      const std::vector<double> narrow = values(lax::dot_general(a, b, c.dn));
      REQUIRE(wide.size() == w.size());
      REQUIRE(narrow.size() == w.size());
      const double rounding = dtype == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;
      for (std::size_t i = 0; i < w.size(); ++i) {
        CHECK(std::abs(wide[i] - w[i]) <= 1e-4 * (std::abs(w[i]) + 1));
        CHECK(std::abs(narrow[i] - w[i]) <= rounding * (std::abs(w[i]) + 1));
      }
    }
  }
}

TEST_CASE("CUDA dot_general: an empty sum is zeros, an empty result is empty" *
          doctest::skip(kNoGpu)) {
  for (const DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    CAPTURE(dtype_name(dtype));
    const Array a = Array::full(Shape{4, 0}, 1.0, dtype, Device::cuda(0));
    const Array b = Array::full(Shape{0, 3}, 1.0, dtype, Device::cuda(0));
    const Array k0 = lax::dot_general(a, b, {{1}, {0}, {}, {}});
    CHECK(k0.shape() == Shape{4, 3});
    CHECK(values(k0) == std::vector<double>(12, 0.0));
    const Array m0 = lax::dot_general(Array::full(Shape{0, 5}, 1.0, dtype, Device::cuda(0)),
                                      Array::full(Shape{5, 3}, 1.0, dtype, Device::cuda(0)),
                                      {{1}, {0}, {}, {}});
    CHECK(m0.shape() == Shape{0, 3});
    CHECK(values(m0).empty());
  }
}

TEST_CASE("CUDA cuDNN: built and running where the GPU check requires it (FLAXPP_REQUIRE_CUDNN)" *
          doctest::skip(kNoGpu)) {
  // scripts/gpu_check.sh sets FLAXPP_REQUIRE_CUDNN=1: on the GPU machine a build without cuDNN,
  // or a cuDNN that cannot load its sub-libraries, fails here instead of quietly falling back;
  // so does one without cuDNN's frontend (the fused attention).
  const char* required = std::getenv("FLAXPP_REQUIRE_CUDNN");
  if (required == nullptr || std::string(required) != "1") {
    MESSAGE("cuDNN not required here (FLAXPP_REQUIRE_CUDNN unset); built: " << cuda::cudnn_built());
    return;
  }
  REQUIRE(cuda::cudnn_built());
  const bool attention_built = lax::attention_kernel(DeviceKind::cuda) != nullptr;
  REQUIRE_MESSAGE(attention_built, "built without cuDNN's frontend (FLAXPP_WITH_CUDNN_FRONTEND)");
  const Array x = astype(random_f32(Shape{64, 1024}, 320).to(Device::cuda(0)), DType::bf16);
  const Array scale = astype(Array::full(Shape{1024}, 1.0, DType::f32, Device::cuda(0)), DType::bf16);
  const Array bias = astype(Array::full(Shape{1024}, 0.0, DType::f32, Device::cuda(0)), DType::bf16);
  cuda::set_use_cudnn(true);
  const std::int64_t runs0 = cuda::cudnn_layer_norm_executions();
  (void)values(lax::layer_norm(x, scale, bias, 1e-6));
  CHECK_MESSAGE(cuda::cudnn_layer_norm_executions() == runs0 + 1,
                "cuDNN did not run LayerNorm for bf16[64, 1024]: see flaxpp's reason on stderr");
}

TEST_CASE("CUDA offload: several steps without a host read reuse pinned buffers safely" *
          doctest::skip(kNoGpu)) {
  constexpr std::int64_t kLayers = 3, kWidth = 128, kBatch = 256;
  std::vector<Array> params;
  for (std::int64_t l = 0; l < kLayers; ++l) {
    params.push_back(random_f32(Shape{kWidth, kWidth}, 330 + unsigned(l)) * 0.05);
    params.push_back(random_f32(Shape{kWidth}, 340 + unsigned(l)) * 0.1);
  }
  auto steps_on = [&](Device device) {
    set_default_device(device);
    std::vector<Array> p;
    for (const Array& a : params)
      p.push_back(a.to(device));
    std::vector<std::vector<Array>> all;
    // Each step's residuals go to pinned memory and come back; the next step takes pinned
    // blocks freed by the last one while its copies may still be queued. No value is read on
    // the host until every step is queued.
    for (unsigned step = 0; step < 6; ++step) {
      const ArrayFn loss = testing::remat_stack_loss(
          random_f32(Shape{kBatch, kWidth}, 350 + step).to(device), kLayers,
          cp::offload_dot_with_no_batch_dims());
      VjpResult r = vjp(loss, p);
      const Array one = Array::full(Shape{}, 1.0, DType::f32, device);
      all.push_back(r.backward_once(std::span<const Array>(&one, 1)));
    }
    set_default_device(Device::cpu());
    return all;
  };
  const auto want = steps_on(Device::cpu());
  const auto got = steps_on(Device::cuda(0));
  for (std::size_t s = 0; s < want.size(); ++s)
    for (std::size_t k = 0; k < want[s].size(); ++k) {
      const std::vector<double> g = values(got[s][k]), w = values(want[s][k]);
      for (std::size_t j = 0; j < g.size(); ++j)
        REQUIRE(std::abs(g[j] - w[j]) <= 1e-4 * (std::abs(w[j]) + 1));
    }
}
