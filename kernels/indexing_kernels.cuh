// kernels/indexing_kernels.cuh — the index primitives on the GPU: iota, take (rows picked by
// index) and scatter_add (updates added to rows, grouped by row on the device so that each
// (row, column) is one thread adding in index order: no atomics, the CPU's order and sums).
// Nothing reads the indices back to the host, so these record into CUDA graphs: an index
// outside [0, rows) is clamped, as JAX does, and recorded in an IndexFault that the backend
// turns into flaxpp's error at its next synchronisation with the host.
#pragma once

#include <cub/device/device_radix_sort.cuh>

#include <cstdint>

#include "cuda_launch.cuh"
#include "index_fault.hpp"

namespace flaxpp::kernels {

// out[i] = the index of i along an axis of `extent` elements with `inner` elements after it.
template <class T>
__global__ void iota_kernel(T* out, std::int64_t n, std::int64_t inner, std::int64_t extent) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride())
    out[i] = store_as<T>((i / inner) % extent);
}

// Index j of idx as a row of an operand of `rows` rows: clamped into [0, rows), the first bad
// one recorded in `fault` (by whichever thread gets there first; every thread clamps alike).
__device__ __forceinline__ std::int64_t checked_row(const std::int32_t* idx, std::int64_t j,
                                                    std::int64_t rows, IndexedOp op,
                                                    IndexFault* fault) {
  const std::int32_t i = idx[j];
  if (i >= 0 && i < rows) return i;
  if (atomicCAS(&fault->seen, 0, 1) == 0) {
    fault->op = op;
    fault->index = i;
    fault->position = j;
    fault->rows = rows;
  }
  return i < 0 ? 0 : rows - 1;
}

// out (m, r) row j = x row idx[j] of x's `rows`; U is any storage type of the element's size.
template <class U>
__global__ void take_kernel(const U* x, std::int64_t rows, const std::int32_t* idx,
                            std::int64_t r, U* out, std::int64_t n, IndexFault* fault) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    const std::int64_t j = i / r, c = i - j * r;
    out[i] = x[checked_row(idx, j, rows, IndexedOp::take, fault) * r + c];
  }
}

// scatter_add's sort input: keys[j] = idx[j] checked against `rows`, positions[j] = j.
__global__ void row_keys_kernel(const std::int32_t* idx, std::int64_t m, std::int64_t rows,
                                std::int32_t* keys, std::int32_t* positions, IndexFault* fault) {
  for (std::int64_t j = grid_index(); j < m; j += grid_stride()) {
    keys[j] = static_cast<std::int32_t>(checked_row(idx, j, rows, IndexedOp::scatter_add, fault));
    positions[j] = static_cast<std::int32_t>(j);
  }
}

// begin[row] = the first k with sorted[k] >= row, for row in [0, rows]: row's updates are
// order[begin[row]] .. order[begin[row + 1] - 1].
__global__ void row_begin_kernel(const std::int32_t* sorted, std::int64_t m, std::int64_t rows,
                                 std::int32_t* begin) {
  for (std::int64_t row = grid_index(); row <= rows; row += grid_stride()) {
    std::int64_t lo = 0, hi = m;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi) / 2;
      if (sorted[mid] < row) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    begin[row] = static_cast<std::int32_t>(lo);
  }
}

// For each row s and column c: out[s, c] += updates[order[k], c] for k in [begin[s],
// begin[s + 1]), in that order, accumulated in compute_t<T> (float for 16-bit types) and
// stored once; rows without updates are left as they are.
template <class T>
__global__ void scatter_add_kernel(const std::int32_t* begin, const std::int32_t* order,
                                   const T* updates, std::int64_t r, T* out, std::int64_t n) {
  using A = compute_t<T>;
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    const std::int64_t s = i / r, c = i - s * r;
    if (begin[s] == begin[s + 1]) continue;
    const std::int64_t o = s * r + c;
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

// out (m, r) = rows idx[0..m) of x (rows, r); idx on the device, a bad one clamped and
// recorded in `fault`.
template <class U>
cudaError_t launch_take(const U* x, std::int64_t rows, const std::int32_t* idx, std::int64_t m,
                        std::int64_t r, U* out, IndexFault* fault, cudaStream_t stream) {
  const std::int64_t n = m * r;
  if (n == 0) return cudaSuccess;
  take_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(x, rows, idx, r, out, n, fault);
  return cudaGetLastError();
}

// scatter_add's grouping of its m update positions (m < 2^31) by destination row, on the
// device: buffers of the sizes noted, sort_scratch of scatter_add_sort_bytes(m, rows) bytes.
// The radix sort is stable, so each row's positions stay ascending: the CPU's order.
struct ScatterAddGroups {
  std::int32_t* keys;       // m: the checked rows, the sort's keys
  std::int32_t* positions;  // m
  std::int32_t* sorted;     // m
  std::int32_t* order;      // m
  std::int32_t* begin;      // rows + 1
  void* sort_scratch;
  std::size_t sort_scratch_bytes;
};

// The bits of the largest row index (at least 1): the radix sort looks at no more.
inline int row_key_bits(std::int64_t rows) {
  int bits = 1;
  while (bits < 31 && (std::int64_t{1} << bits) < rows) ++bits;
  return bits;
}

// CUB's own scratch for sorting m keys of row_key_bits(rows) bits (no GPU work).
inline cudaError_t scatter_add_sort_bytes(std::int64_t m, std::int64_t rows, std::size_t& bytes) {
  return cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                         static_cast<std::int32_t*>(nullptr),
                                         static_cast<const std::int32_t*>(nullptr),
                                         static_cast<std::int32_t*>(nullptr),
                                         static_cast<int>(m), 0, row_key_bits(rows));
}

// out (rows, r), holding the operand already, gets the updates (m, r) added to the rows idx
// names (each checked as take's), grouped on the device through `g`.
template <class T>
cudaError_t launch_scatter_add(const std::int32_t* idx, std::int64_t m, std::int64_t rows,
                               const T* updates, std::int64_t r, T* out,
                               const ScatterAddGroups& g, IndexFault* fault,
                               cudaStream_t stream) {
  if (m == 0 || rows * r == 0) return cudaSuccess;
  row_keys_kernel<<<grid_blocks(m), kBlockThreads, 0, stream>>>(idx, m, rows, g.keys,
                                                                g.positions, fault);
  std::size_t bytes = g.sort_scratch_bytes;
  cudaError_t err = cub::DeviceRadixSort::SortPairs(g.sort_scratch, bytes, g.keys, g.sorted,
                                                    g.positions, g.order, static_cast<int>(m), 0,
                                                    row_key_bits(rows), stream);
  if (err != cudaSuccess) return err;
  row_begin_kernel<<<grid_blocks(rows + 1), kBlockThreads, 0, stream>>>(g.sorted, m, rows,
                                                                        g.begin);
  scatter_add_kernel<<<grid_blocks(rows * r), kBlockThreads, 0, stream>>>(g.begin, g.order,
                                                                          updates, r, out,
                                                                          rows * r);
  return cudaGetLastError();
}

}  // namespace flaxpp::kernels
