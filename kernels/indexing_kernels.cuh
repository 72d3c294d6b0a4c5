// kernels/indexing_kernels.cuh — the index primitives on the GPU: iota, take (rows picked by
// index) and scatter_add (updates added to rows, grouped by row on the host so that each
// (row, column) is one thread adding in index order: no atomics, the CPU's order and sums).
// Indices arrive checked (every one a row of the operand).
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"

namespace flaxpp::kernels {

// out[i] = the index of i along an axis of `extent` elements with `inner` elements after it.
template <class T>
__global__ void iota_kernel(T* out, std::int64_t n, std::int64_t inner, std::int64_t extent) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride())
    out[i] = store_as<T>((i / inner) % extent);
}

// out (m, r) row j = x row idx[j]; U is any storage type of the element's size.
template <class U>
__global__ void take_kernel(const U* x, const std::int32_t* idx, std::int64_t r, U* out,
                            std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    const std::int64_t j = i / r, c = i - j * r;
    out[i] = x[static_cast<std::int64_t>(idx[j]) * r + c];
  }
}

// For each group s and column c: out[rows[s], c] += updates[order[k], c] for k in
// [begin[s], begin[s + 1]), in that order, accumulated in compute_t<T> (float for 16-bit types)
// and stored once.
template <class T>
__global__ void scatter_add_kernel(const std::int32_t* rows, const std::int32_t* begin,
                                   const std::int32_t* order, const T* updates, std::int64_t r,
                                   T* out, std::int64_t n) {
  using A = compute_t<T>;
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    const std::int64_t s = i / r, c = i - s * r;
    const std::int64_t o = static_cast<std::int64_t>(rows[s]) * r + c;
    A acc = static_cast<A>(out[o]);
    for (std::int32_t k = begin[s]; k < begin[s + 1]; ++k)
      acc += static_cast<A>(updates[static_cast<std::int64_t>(order[k]) * r + c]);
    out[o] = store_as<T>(acc);
  }
}

// ---- launchers: raw pointers, sizes and a stream; each returns its launch's error -------

// out: n elements of an array whose iota axis has `extent` elements and `inner` after it.
template <class T>
cudaError_t launch_iota(T* out, std::int64_t n, std::int64_t inner, std::int64_t extent,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  iota_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(out, n, inner, extent);
  return cudaGetLastError();
}

// out (m, r) = rows idx[0..m) of x (N, r); idx on the device, each in [0, N).
template <class U>
cudaError_t launch_take(const U* x, const std::int32_t* idx, std::int64_t m, std::int64_t r, U* out,
                        cudaStream_t stream) {
  const std::int64_t n = m * r;
  if (n == 0) return cudaSuccess;
  take_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(x, idx, r, out, n);
  return cudaGetLastError();
}

// out (N, r), holding the operand already, gets the updates (m, r) of `groups` row groups
// (rows, begin with groups + 1 entries, order: backend/index_plan.hpp, on the device).
template <class T>
cudaError_t launch_scatter_add(const std::int32_t* rows, const std::int32_t* begin,
                               const std::int32_t* order, std::int64_t groups, const T* updates,
                               std::int64_t r, T* out, cudaStream_t stream) {
  const std::int64_t n = groups * r;
  if (n == 0) return cudaSuccess;
  scatter_add_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(rows, begin, order, updates, r,
                                                                   out, n);
  return cudaGetLastError();
}

}  // namespace flaxpp::kernels
