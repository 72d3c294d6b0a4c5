// kernels/gather_kernel.cuh — the strided gather of layout_plan.hpp on the GPU: broadcast,
// transpose and dot_general's operand permutation. One thread per result element; the plan
// arrives simplified (size-1 axes dropped, runs merged), so most calls have rank 1 or 2.
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"
#include "fast_divmod.hpp"

namespace flaxpp::kernels {

inline constexpr int kMaxGatherRank = 8;

// The gather's result dims and operand strides, passed by value.
struct GatherGeometry {
  std::int64_t dims[kMaxGatherRank];
  std::int64_t strides[kMaxGatherRank];
  int rank;
};

// out[i] = in[offset of i's coordinates]; T is any storage type of the element's size.
template <class T>
__global__ void gather_kernel(const T* in, GatherGeometry g, T* out, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    std::int64_t rest = i, offset = 0;
    for (int k = g.rank - 1; k >= 0; --k) {
      offset += (rest % g.dims[k]) * g.strides[k];
      rest /= g.dims[k];
    }
    out[i] = in[offset];
  }
}

// The same for n < 2^31 elements, each axis's divide a multiply and a shift (FastDivmod): the
// usual case, where the 64-bit divides of gather_kernel cost more than the copy.
struct FastGatherGeometry {
  FastDivmod dims[kMaxGatherRank];
  std::int64_t strides[kMaxGatherRank];
  int rank;
};
template <class T>
__global__ void gather_fast_kernel(const T* in, FastGatherGeometry g, T* out, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    auto rest = static_cast<std::uint32_t>(i);
    std::int64_t offset = 0;
    for (int k = g.rank - 1; k > 0; --k) {
      std::uint32_t q, r;
      g.dims[k].divmod(rest, q, r);
      offset += static_cast<std::int64_t>(r) * g.strides[k];
      rest = q;
    }
    out[i] = in[offset + static_cast<std::int64_t>(rest) * g.strides[0]];
  }
}

// A 2-D transpose out(rows, cols) = in(cols, rows) read through a padded shared-memory
// tile, so that both the reads and the writes are coalesced.
inline constexpr int kTransposeTile = 32;
inline constexpr int kTransposeRows = 8;
template <class T>
__global__ void transpose_2d_kernel(const T* in, std::int64_t rows, std::int64_t cols, T* out) {
  __shared__ T tile[kTransposeTile][kTransposeTile + 1];
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kTransposeTile;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kTransposeTile;
  // Read in(c, r) for c in the tile's columns of out, r in its rows: in is (cols, rows).
  for (int j = threadIdx.y; j < kTransposeTile; j += kTransposeRows) {
    const std::int64_t c = c0 + j, r = r0 + threadIdx.x;
    if (c < cols && r < rows) tile[j][threadIdx.x] = in[c * rows + r];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kTransposeTile; j += kTransposeRows) {
    const std::int64_t r = r0 + j, c = c0 + threadIdx.x;
    if (r < rows && c < cols) out[r * cols + c] = tile[threadIdx.x][j];
  }
}

// ---- launchers: raw pointers, sizes and a stream; each returns its launch's error -------

// out (n elements, row-major over dims[0..rank)) = in at sum(index_k * strides[k]); rank at
// most kMaxGatherRank, every dim >= 1. Divides by multiply-and-shift below 2^31 elements.
template <class T>
cudaError_t launch_gather(const T* in, const std::int64_t* dims, const std::int64_t* strides,
                          int rank, T* out, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (n <= FastDivmod::kMaxDividend) {
    FastGatherGeometry g{};
    g.rank = rank;
    for (int k = 0; k < rank; ++k) {
      g.dims[k] = FastDivmod(static_cast<std::uint32_t>(dims[k]));
      g.strides[k] = strides[k];
    }
    gather_fast_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(in, g, out, n);
    return cudaGetLastError();
  }
  GatherGeometry g{};
  g.rank = rank;
  for (int k = 0; k < rank; ++k) {
    g.dims[k] = dims[k];
    g.strides[k] = strides[k];
  }
  gather_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(in, g, out, n);
  return cudaGetLastError();
}

// out (rows, cols) = the transpose of in (cols, rows); the caller checks that the row tiles
// fit gridDim.y (transpose_fits).
inline bool transpose_fits(std::int64_t rows) {
  return ceil_div(rows, kTransposeTile) <= kMaxGridY;
}
template <class T>
cudaError_t launch_transpose_2d(const T* in, std::int64_t rows, std::int64_t cols, T* out,
                                cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, kTransposeTile)),
                  static_cast<unsigned>(ceil_div(rows, kTransposeTile)));
  transpose_2d_kernel<<<grid, dim3(kTransposeTile, kTransposeRows), 0, stream>>>(in, rows, cols,
                                                                                 out);
  return cudaGetLastError();
}

}  // namespace flaxpp::kernels
