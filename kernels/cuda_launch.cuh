// kernels/cuda_launch.cuh — launch geometry shared by flaxpp's CUDA kernels, and the element
// types they compute in (bf16 and f16 are stored as such but computed in float, as XLA does).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace flaxpp::kernels {

inline constexpr int kBlockThreads = 256;

// Blocks for a grid-stride loop over n elements: enough to fill an H100/H200 many times over,
// never more than the grid allows.
inline unsigned grid_blocks(std::int64_t n) {
  const std::int64_t blocks = (n + kBlockThreads - 1) / kBlockThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

// The first index of this thread and the stride of a grid-stride loop.
__device__ __forceinline__ std::int64_t grid_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// 16-bit floating types: stored as themselves, computed in float.
template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

template <class T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

// Stores a computed value as an element of type S (16-bit floats round from float; bool
// results are stored as bytes). Host code uses it too (a reduction's identity for a fill).
template <class S, class V>
__host__ __device__ __forceinline__ S store_as(V v) {
  if constexpr (is_half_v<S>) {
    return S(static_cast<float>(v));
  } else {
    return static_cast<S>(v);
  }
}

}  // namespace flaxpp::kernels
