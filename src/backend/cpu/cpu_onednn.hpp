// float32 matrix products and convolutions through oneDNN's matmul and convolution primitives
// (built with FLAXPP_WITH_ONEDNN); the primitives are kept by shape, layout and thread count
// (onednn_runtime.hpp).
#pragma once

#include <cstdint>

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
