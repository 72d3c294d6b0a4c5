// kernels/reduce_kernels.cuh — reductions on the GPU with the functors of elementwise.hpp
// (Add, NaN-propagating Max), laid out by launch_geometry.hpp's plans. Every output element is
// reduced by a fixed tree of partial results, so results are deterministic run to run. 16-bit
// floats accumulate in float; In and Out are the element types read and written (a split
// reduction's partials are in the accumulation type).
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"
#include "flaxpp/kernels/elementwise.hpp"

namespace flaxpp::kernels {

// Combines the partial results of a warp by a fixed butterfly: every lane gets the result.
template <class Op, class A>
__device__ __forceinline__ A warp_reduce(Op op, A value) {
  for (int offset = kWarpThreads / 2; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// Combines the partial results of a block's threads (blockDim.x == kBlockThreads): warp
// shuffles, then one value per warp through shared memory. Thread 0 gets the result; `init`
// is the operation's identity.
template <class Op, class A>
__device__ A block_reduce(Op op, A value, A init) {
  constexpr int kWarps = kBlockThreads / kWarpThreads;
  __shared__ A partial[kWarps];
  value = warp_reduce(op, value);
  const int warp = threadIdx.x / kWarpThreads, lane = threadIdx.x % kWarpThreads;
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (warp == 0) value = warp_reduce(op, lane < kWarps ? partial[lane] : init);
  __syncthreads();  // `partial` is reused by the block's next row
  return value;
}

// Rows of a (rows, cols) array reduced along cols, one warp per row (cols up to
// kWarpRowMaxCols: a softmax over classes), kBlockThreads / 32 rows per block, grid-stride.
template <class Op, class In, class Out>
__global__ void reduce_rows_warp_kernel(Op op, const In* x, std::int64_t rows, std::int64_t cols,
                                        compute_t<Out> init, Out* out) {
  using A = compute_t<Out>;
  constexpr int kWarps = kBlockThreads / kWarpThreads;
  const int lane = threadIdx.x % kWarpThreads;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpThreads;
       r < rows; r += static_cast<std::int64_t>(gridDim.x) * kWarps) {
    const In* row = x + r * cols;
    A acc = init;
    for (std::int64_t c = lane; c < cols; c += kWarpThreads)
      acc = op(acc, static_cast<A>(row[c]));
    acc = warp_reduce(op, acc);
    if (lane == 0) out[r] = store_as<Out>(acc);
  }
}

// Rows reduced along cols, one block per row (grid-stride over rows), each thread striding
// over the row.
template <class Op, class In, class Out>
__global__ void reduce_rows_kernel(Op op, const In* x, std::int64_t rows, std::int64_t cols,
                                   compute_t<Out> init, Out* out) {
  using A = compute_t<Out>;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const In* row = x + r * cols;
    A acc = init;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      acc = op(acc, static_cast<A>(row[c]));
    acc = block_reduce(op, acc, init);
    if (threadIdx.x == 0) out[r] = store_as<Out>(acc);
  }
}

// The first pass of a split row reduction: block (chunk, row) = (blockIdx.x, blockIdx.y)
// reduces x[row, chunk * chunk_len ...] into partial[row * gridDim.x + chunk].
template <class Op, class T>
__global__ void reduce_row_chunks_kernel(Op op, const T* x, std::int64_t cols,
                                         std::int64_t chunk_len, compute_t<T> init,
                                         compute_t<T>* partial) {
  using A = compute_t<T>;
  const std::int64_t row = blockIdx.y, begin = static_cast<std::int64_t>(blockIdx.x) * chunk_len;
  const std::int64_t end = begin + chunk_len < cols ? begin + chunk_len : cols;
  const T* r = x + row * cols;
  A acc = init;
  for (std::int64_t c = begin + threadIdx.x; c < end; c += blockDim.x)
    acc = op(acc, static_cast<A>(r[c]));
  acc = block_reduce(op, acc, init);
  if (threadIdx.x == 0) partial[row * gridDim.x + blockIdx.x] = acc;
}

// Columns of a (rows, cols) array reduced along rows: block (column block, chunk) =
// (blockIdx.x, blockIdx.y) takes kColumns adjacent columns (coalesced reads) of rows
// [chunk * rows_per_chunk, ...); each of its kRowLanes row lanes strides over those rows, then
// the lanes are combined in a fixed order through shared memory into out[chunk, c] (the
// result itself when there is one chunk, else a partial for a second launch).
template <class Op, class In, class Out>
__global__ void reduce_columns_kernel(Op op, const In* x, std::int64_t rows, std::int64_t cols,
                                      std::int64_t rows_per_chunk, compute_t<Out> init, Out* out) {
  using A = compute_t<Out>;
  __shared__ A partial[kRowLanes][kColumns];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * rows_per_chunk;
  const std::int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  A acc = init;
  if (c < cols)
    for (std::int64_t r = begin + threadIdx.y; r < end; r += kRowLanes)
      acc = op(acc, static_cast<A>(x[r * cols + c]));
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int lane = 1; lane < kRowLanes; ++lane)
      acc = op(acc, partial[lane][threadIdx.x]);
    out[static_cast<std::int64_t>(blockIdx.y) * cols + c] = store_as<Out>(acc);
  }
}

// ---- launchers: raw pointers, sizes and a stream; each returns its launch's error -------

template <class Op, class In, class Out>
cudaError_t launch_reduce_rows_warp(Op op, const In* x, std::int64_t rows, std::int64_t cols,
                                    compute_t<Out> init, Out* out, cudaStream_t stream) {
  const std::int64_t blocks = ceil_div(rows, kBlockThreads / kWarpThreads);
  reduce_rows_warp_kernel<<<static_cast<unsigned>(blocks < kMaxGridBlocks ? blocks : kMaxGridBlocks),
                            kBlockThreads, 0, stream>>>(op, x, rows, cols, init, out);
  return cudaGetLastError();
}

template <class Op, class In, class Out>
cudaError_t launch_reduce_rows_block(Op op, const In* x, std::int64_t rows, std::int64_t cols,
                                     compute_t<Out> init, Out* out, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(rows < kMaxGridBlocks ? rows : kMaxGridBlocks);
  reduce_rows_kernel<<<blocks, kBlockThreads, 0, stream>>>(op, x, rows, cols, init, out);
  return cudaGetLastError();
}

// partial: (rows, plan.chunks) in the accumulation type.
template <class Op, class T>
cudaError_t launch_reduce_row_chunks(Op op, const T* x, std::int64_t rows, std::int64_t cols,
                                     const RowReducePlan& plan, compute_t<T> init,
                                     compute_t<T>* partial, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.chunks), static_cast<unsigned>(rows));
  reduce_row_chunks_kernel<<<grid, kBlockThreads, 0, stream>>>(op, x, cols, plan.chunk, init,
                                                               partial);
  return cudaGetLastError();
}

// out: (chunks, cols) — the result itself with one chunk, partials otherwise.
template <class Op, class In, class Out>
cudaError_t launch_reduce_columns(Op op, const In* x, std::int64_t rows, std::int64_t cols,
                                  std::int64_t rows_per_chunk, std::int64_t chunks,
                                  compute_t<Out> init, Out* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, kColumns)), static_cast<unsigned>(chunks));
  reduce_columns_kernel<<<grid, dim3(kColumns, kRowLanes), 0, stream>>>(op, x, rows, cols,
                                                                        rows_per_chunk, init, out);
  return cudaGetLastError();
}

}  // namespace flaxpp::kernels
