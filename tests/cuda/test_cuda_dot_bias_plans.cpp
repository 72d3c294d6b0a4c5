// cuBLASLt's bias epilogue on a GPU: products it is not asked for (one row, one column; desk
// review 2 #2) add their bias after the GEMM with the CPU's result, and an eager
// dot_general_bias makes its plan (descriptors, heuristic) once per shape, not per call (#13).
#include <doctest/doctest.h>

#include <cstddef>
#include <span>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/ir/lax.hpp"
#include "harness/cuda_parity.hpp"
#include "src/backend/cuda/cuda_backend.hpp"

using namespace flaxpp;
using testing::check_parity;
using testing::kNoGpu;
using testing::random_f32;

namespace {

Array dense(std::span<const Array> v) {
  return ir::bind1(lax::dot_general_bias_p, v,
                   ir::Params{{"dimension_numbers", ir::DotDimensionNumbers{{1}, {0}, {}, {}}}});
}

cuda::LtBiasPlans& plans() {
  return dynamic_cast<cuda::CudaBackend&>(backend(Device::cuda(0))).lt_bias_plans();
}

}  // namespace

TEST_CASE("CUDA dot_general_bias: one-row and one-column products take the GEMM and a bias "
          "kernel, with the CPU's values" *
          doctest::skip(kNoGpu)) {
  // Dense(features=1) (the column-major product has one row), a batch of one row, and a
  // product over one element: cuBLASLt's heuristic is not asked for these.
  check_parity(dense, {random_f32(Shape{32, 20}, 1), random_f32(Shape{20, 1}, 2),
                       random_f32(Shape{1}, 3)}, 2e-5);
  check_parity(dense, {random_f32(Shape{1, 20}, 4), random_f32(Shape{20, 32}, 5),
                       random_f32(Shape{32}, 6)}, 2e-5);
  check_parity(dense, {random_f32(Shape{16, 1}, 7), random_f32(Shape{1, 24}, 8),
                       random_f32(Shape{24}, 9)}, 2e-5);
}

TEST_CASE("CUDA dot_general_bias: an eager product makes its cuBLASLt plan once and reuses it" *
          doctest::skip(kNoGpu)) {
  // A shape no other case uses; each call with new buffers of the same (256-byte aligned)
  // kind, as an eager train step's Dense layers do.
  const std::size_t before = plans().size();
  REQUIRE(before + 1 < cuda::LtBiasPlans::kMaxPlans);  // no clear in between
  for (unsigned i = 0; i < 3; ++i) {
    CAPTURE(i);
    check_parity(dense, {random_f32(Shape{37, 29}, 10 + i), random_f32(Shape{29, 23}, 20 + i),
                         random_f32(Shape{23}, 30 + i)}, 2e-5);
    CHECK(plans().size() == before + 1);
  }
  // A new shape is a new plan.
  check_parity(dense, {random_f32(Shape{37, 29}, 40), random_f32(Shape{29, 25}, 41),
                       random_f32(Shape{25}, 42)}, 2e-5);
  CHECK(plans().size() == before + 2);
}
