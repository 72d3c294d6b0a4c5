// kernels/slicing_kernels.cuh — pad and concatenate on the GPU: an operand written into part of
// the result through layout_plan.hpp's StridedPlacement (one thread per operand element), and
// pad's fill with a padding value that stays on the device.
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"
#include "gather_kernel.cuh"

namespace flaxpp::kernels {

// The placement's dims and both views' strides and offsets, passed by value.
struct PlaceGeometry {
  std::int64_t dims[kMaxGatherRank];
  std::int64_t src_strides[kMaxGatherRank];
  std::int64_t dst_strides[kMaxGatherRank];
  std::int64_t src_offset, dst_offset;
  int rank;
};

template <class T>
__global__ void place_kernel(const T* in, PlaceGeometry g, T* out, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    std::int64_t rest = i, src = g.src_offset, dst = g.dst_offset;
    for (int k = g.rank - 1; k >= 0; --k) {
      const std::int64_t c = rest % g.dims[k];
      rest /= g.dims[k];
      src += c * g.src_strides[k];
      dst += c * g.dst_strides[k];
    }
    out[dst] = in[src];
  }
}

template <class T>
__global__ void fill_from_kernel(const T* value, T* out, std::int64_t n) {
  const T v = *value;
  for (std::int64_t i = grid_index(); i < n; i += grid_stride())
    out[i] = v;
}

// ---- launchers: raw pointers, sizes and a stream; each returns its launch's error -------

// n elements, row-major over dims[0..rank), rank at most kMaxGatherRank.
template <class T>
cudaError_t launch_place(const T* in, const PlaceGeometry& g, T* out, std::int64_t n,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  place_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(in, g, out, n);
  return cudaGetLastError();
}

// out[0..n) = *value, both in device memory.
template <class T>
cudaError_t launch_fill_from(const T* value, T* out, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fill_from_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(value, out, n);
  return cudaGetLastError();
}

}  // namespace flaxpp::kernels
