// kernels/reduce_kernels.cuh — reductions on the GPU with the functors of elementwise.hpp
// (Add, NaN-propagating Max). Every output element is reduced by a fixed tree of partial
// results, so results are deterministic run to run. 16-bit floats accumulate in float.
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"
#include "elementwise.hpp"

namespace flaxpp::kernels {

// Combines the partial results of a block's threads (blockDim.x == kBlockThreads): warp
// shuffles, then one value per warp through shared memory. Thread 0 gets the result; `init`
// is the operation's identity.
template <class Op, class A>
__device__ A block_reduce(Op op, A value, A init) {
  constexpr int kWarps = kBlockThreads / 32;
  __shared__ A partial[kWarps];
  for (int offset = 16; offset > 0; offset /= 2)
    value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < kWarps ? partial[lane] : init;
    for (int offset = kWarps / 2; offset > 0; offset /= 2)
      value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
  }
  __syncthreads();  // `partial` is reused by the block's next row
  return value;
}

// Rows of a (rows, cols) row-major array reduced along cols: one block per row (grid-stride
// over rows), each thread striding over the row.
template <class Op, class T>
__global__ void reduce_rows_kernel(Op op, const T* x, std::int64_t rows, std::int64_t cols,
                                   compute_t<T> init, T* out) {
  using A = compute_t<T>;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * cols;
    A acc = init;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      acc = op(acc, static_cast<A>(row[c]));
    acc = block_reduce(op, acc, init);
    if (threadIdx.x == 0) out[r] = store_as<T>(acc);
  }
}

// Columns of a (rows, cols) row-major array reduced along rows: a block of kColumns x
// kRowLanes threads takes kColumns adjacent columns (coalesced reads); each row lane strides
// over the rows, then the lanes are combined in a fixed order through shared memory.
inline constexpr int kColumns = 32;
inline constexpr int kRowLanes = 8;
template <class Op, class T>
__global__ void reduce_columns_kernel(Op op, const T* x, std::int64_t rows, std::int64_t cols,
                                      compute_t<T> init, T* out) {
  using A = compute_t<T>;
  __shared__ A partial[kRowLanes][kColumns];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  A acc = init;
  if (c < cols)
    for (std::int64_t r = threadIdx.y; r < rows; r += kRowLanes)
      acc = op(acc, static_cast<A>(x[r * cols + c]));
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int lane = 1; lane < kRowLanes; ++lane)
      acc = op(acc, partial[lane][threadIdx.x]);
    out[c] = store_as<T>(acc);
  }
}

}  // namespace flaxpp::kernels
