// kernels/slicing_kernels.cuh — pad, concatenate, dynamic_slice and dynamic_update_slice on the
// GPU: an operand written into part of the result through layout_plan.hpp's StridedPlacement
// (one thread per operand element); pad's fill with a padding value that stays on the device;
// the dynamic ones read their start indices on the device, so nothing waits for the host and
// a step that slices at a traced position still records into a CUDA graph.
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"
#include "flaxpp/kernels/clamp_start.hpp"
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

// A dynamic block: its dims, the row-major strides of the array it lies in, that array's dims,
// and a device pointer to each start index.
struct BlockGeometry {
  std::int64_t dims[kMaxGatherRank];
  std::int64_t strides[kMaxGatherRank];
  std::int64_t outer_dims[kMaxGatherRank];
  const std::int32_t* starts[kMaxGatherRank];
  int rank;
};

// The offset of block element i in the array it lies in.
__device__ __forceinline__ std::int64_t block_offset(const BlockGeometry& g, std::int64_t i) {
  std::int64_t rest = i, offset = 0;
  for (int k = g.rank - 1; k >= 0; --k) {
    const std::int64_t start = clamp_start(*g.starts[k], g.outer_dims[k], g.dims[k]);
    offset += (start + rest % g.dims[k]) * g.strides[k];
    rest /= g.dims[k];
  }
  return offset;
}

// dynamic_slice: out (the block) = in at the block.
template <class T>
__global__ void dynamic_slice_kernel(const T* in, BlockGeometry g, T* out, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride())
    out[i] = in[block_offset(g, i)];
}

// dynamic_update_slice: out at the block = update (out already holds the operand).
template <class T>
__global__ void dynamic_update_kernel(const T* update, BlockGeometry g, T* out, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride())
    out[block_offset(g, i)] = update[i];
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

// n block elements, rank at most kMaxGatherRank.
template <class T>
cudaError_t launch_dynamic_slice(const T* in, const BlockGeometry& g, T* out, std::int64_t n,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  dynamic_slice_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(in, g, out, n);
  return cudaGetLastError();
}
template <class T>
cudaError_t launch_dynamic_update(const T* update, const BlockGeometry& g, T* out, std::int64_t n,
                                  cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  dynamic_update_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(update, g, out, n);
  return cudaGetLastError();
}

}  // namespace flaxpp::kernels
