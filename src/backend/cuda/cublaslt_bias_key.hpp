// Which products cuBLASLt's bias epilogue is asked to take (cuda_dot_general.cpp). Plain C++
// without CUDA headers, so that the CPU tests check it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flaxpp::cuda {

// The largest power of two, up to 256, that divides `address`: what cuBLASLt's heuristic may
// assume of a pointer (its default assumption, 256, would pick algorithms a less aligned
// pointer fails).
constexpr std::uint32_t pointer_alignment(std::uintptr_t address) {
  std::uint32_t align = 256;
  while (align > 1 && address % align != 0)
    align /= 2;
  return align;
}

// Whether to ask cuBLASLt's BIAS epilogue for a column-major (m, n) = (m, k) (k, n) product of
// `batch` matrices. One matrix only (the bias would need a batch stride). Every dimension above
// 1: PyTorch documents CUBLAS_STATUS_INVALID_VALUE from cublasLtMatmulAlgoGetHeuristic when an
// operand has one row or column, and keeps such products on the plain GEMM, as done here (a
// Dense(features=1) output layer). The bias at least 16-byte aligned, the epilogue's
// requirement as Marian found it (flaxpp's buffers are 256-byte aligned).
constexpr bool bias_epilogue_applies(std::int64_t m, std::int64_t n, std::int64_t k,
                                     std::int64_t batch, std::uint32_t bias_alignment) {
  return batch == 1 && m > 1 && n > 1 && k > 1 && bias_alignment >= 16;
}

}  // namespace flaxpp::cuda
