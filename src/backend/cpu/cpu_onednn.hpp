// float32 matrix products and convolutions through oneDNN's matmul and convolution primitives
// (built with FLAXPP_WITH_ONEDNN); the primitives are kept by shape, layout and thread count
// (onednn_runtime.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/conv_library.hpp"

namespace flaxpp::cpu {

// Per batch element, C (m, n) = A (m, k) · B (k, n), every matrix contiguous and row-major,
// A stored as its (k, m) transpose when transpose_a (B as (n, k) when transpose_b), and the
// batch elements one after another.
struct BatchedGemm {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  bool operator==(const BatchedGemm&) const = default;
};

// C = A·B on oneDNN with `threads` threads (0: OpenMP's default), overwriting C. Throws
// DeviceError with oneDNN's status when it fails.
void onednn_gemm(const BatchedGemm& gemm, const float* a, const float* b, float* c, int threads);

// A batch of products whose operands are read where they are: each as (batch dims..., rows,
// cols) with its strides in elements (layout_plan.hpp's MatrixOperand::dims and strides), A
// (.., m, k) and B (.., k, n); C (batch dims..., m, n) contiguous.
struct StridedGemm {
  std::vector<std::int64_t> a_dims, a_strides, b_dims, b_strides;
  bool operator==(const StridedGemm&) const = default;
};

// C = A·B as onednn_gemm, reading A and B with their strides. False where oneDNN has only its
// reference implementation for these layouts (remembered): the caller permutes the operands
// and multiplies contiguous matrices instead.
bool onednn_strided_gemm(const StridedGemm& gemm, const float* a, const float* b, float* c,
                         int threads);

// How many products onednn_strided_gemm has run.
std::int64_t onednn_strided_gemm_runs();

// The pass `conv` describes on float32 arrays (operands[0] the lhs, [1] the rhs, [2] the
// result, as conv.x/w/y.operand number them), with `threads` threads; a backward data pass
// with conv.x_shrunk leaves the positions it does not reach as they were. False where oneDNN has
// no implementation of it (remembered): the caller computes it otherwise. Throws DeviceError
// with oneDNN's status when a primitive fails to run.
bool onednn_conv(const backend_impl::LibraryConv& conv, const float* lhs, const float* rhs,
                 float* out, int threads);

// How many passes onednn_conv has run.
std::int64_t onednn_conv_runs();

}  // namespace flaxpp::cpu
