// float32 matrix products through oneDNN's matmul primitive (built with FLAXPP_WITH_ONEDNN).
//
// flaxpp keeps the primitives it made, keyed by shape, layout and thread count. oneDNN caches
// primitives too (1024 by default), but finding one there still costs a full primitive
// descriptor: the walk over its implementations that picks a kernel for the shape, which takes
// longer than a small product. flaxpp's table skips that walk.
//
// Threads: Debian's oneDNN runs on OpenMP (libgomp). A product asks OpenMP for the threads of
// cpu::num_threads() (0: OpenMP's default, one per core or OMP_NUM_THREADS), on the calling
// thread, before it runs.
#pragma once

#include <cstdint>

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

}  // namespace flaxpp::cpu
