// kernels/cuda_launch.cuh — device-side helpers of flaxpp's CUDA kernels: grid-stride indices,
// the element types they compute in (bf16 and f16 are stored as such but computed in float, as
// XLA does), and aligned vectors for 16-byte loads. The launch geometry itself is plain C++
// (launch_geometry.hpp), tested on the CPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "launch_geometry.hpp"

namespace flaxpp::kernels {

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

// kVecBytes of consecutive elements, loaded and stored as one 16-byte access. Kernels over
// 16-bit elements use it where every pointer is aligned (is_vec_aligned): a scalar 2-byte load
// per thread uses an eighth of each memory transaction's width.
inline constexpr int kVecBytes = 16;
template <class T>
struct alignas(kVecBytes) Vec {
  static constexpr int kSize = kVecBytes / static_cast<int>(sizeof(T));
  T v[kSize];
};
inline bool is_vec_aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kVecBytes == 0;
}

}  // namespace flaxpp::kernels
