// Which products cuBLASLt's bias epilogue is asked to take, and the key its plans (descriptor,
// layouts and the heuristic's algorithm, cublaslt_bias_plans.hpp) are cached by. Plain C++
// without CUDA headers, so that the CPU tests check it; the CUDA types are stored as ints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

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

// Everything a cached plan depends on: the column-major product's shape, leading dimensions
// and transposes, the data and compute types (cudaDataType_t, cublasComputeType_t), and the
// alignments the heuristic was told of the operands (an algorithm chosen for 256-byte aligned
// pointers may fail on a 4-byte aligned view). The bias pointer is not part of it: it is set
// on the descriptor at every use.
struct LtBiasKey {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t ld_first = 0, ld_second = 0, ld_out = 0;
  bool transpose_first = false, transpose_second = false;
  int data_type = 0, compute_type = 0;
  std::uint32_t align_first = 0, align_second = 0, align_out = 0;
  bool operator==(const LtBiasKey&) const = default;
};

struct LtBiasKeyHash {
  std::size_t operator()(const LtBiasKey& key) const noexcept {
    std::size_t h = 0;
    // boost::hash_combine's mixing: equal keys hash equal, near keys spread.
    const auto mix = [&h](std::uint64_t v) {
      h ^= std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    };
    for (const std::int64_t v : {key.m, key.n, key.k, key.ld_first, key.ld_second, key.ld_out})
      mix(static_cast<std::uint64_t>(v));
    mix((std::uint64_t{key.transpose_first} << 1) | std::uint64_t{key.transpose_second});
    mix((static_cast<std::uint64_t>(static_cast<std::uint32_t>(key.data_type)) << 32) |
        static_cast<std::uint32_t>(key.compute_type));
    for (const std::uint32_t v : {key.align_first, key.align_second, key.align_out})
      mix(v);
    return h;
  }
};

}  // namespace flaxpp::cuda
