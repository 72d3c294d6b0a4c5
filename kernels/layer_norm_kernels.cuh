// kernels/layer_norm_kernels.cuh — the layer_norm primitives on the GPU (our kernels: the
// fallback where cuDNN is absent or rejects a configuration). One block per row (grid-stride
// over rows) for the forward pass and dx; dscale sums over rows per feature like
// reduce_columns_kernel, split into row chunks where there are many rows. The per-row math is kernels/layer_norm.hpp's, shared with the CPU.
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"
#include "layer_norm.hpp"
#include "reduce_kernels.cuh"

namespace flaxpp::kernels {

// The sum of `value` over the block, in every thread (block_reduce gives it to thread 0).
template <class A>
__device__ A block_sum_all(A value) {
  __shared__ A total;
  value = block_reduce(Add{}, value, A(0));
  if (threadIdx.x == 0) total = value;
  __syncthreads();
  const A out = total;
  __syncthreads();  // `total` is reused by the next call
  return out;
}

// The statistics of one row, in every thread of the block.
template <class T>
__device__ LayerNormStats<compute_t<T>> block_row_stats(const T* x, std::int64_t f,
                                                        compute_t<T> epsilon) {
  using A = compute_t<T>;
  A sum = 0, sum_sq = 0;
  for (std::int64_t i = threadIdx.x; i < f; i += blockDim.x) {
    const A v = static_cast<A>(x[i]);
    sum += v;
    sum_sq += v * v;
  }
  sum = block_sum_all(sum);
  sum_sq = block_sum_all(sum_sq);
  return layer_norm_stats(sum, sum_sq, static_cast<A>(f), epsilon);
}

template <class T>
__global__ void layer_norm_kernel(const T* x, const T* scale, const T* bias, std::int64_t rows,
                                  std::int64_t f, compute_t<T> epsilon, T* y) {
  using A = compute_t<T>;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const LayerNormStats<A> s = block_row_stats(x + r * f, f, epsilon);
    for (std::int64_t i = threadIdx.x; i < f; i += blockDim.x)
      y[r * f + i] = store_as<T>(layer_norm_y(static_cast<A>(x[r * f + i]), s,
                                              static_cast<A>(scale[i]), static_cast<A>(bias[i])));
  }
}

template <class T>
__global__ void layer_norm_dx_kernel(const T* x, const T* scale, const T* dy, std::int64_t rows,
                                     std::int64_t f, compute_t<T> epsilon, T* dx) {
  using A = compute_t<T>;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * f;
    const T* dyr = dy + r * f;
    const LayerNormStats<A> s = block_row_stats(xr, f, epsilon);
    A sum_g = 0, sum_g_xhat = 0;
    for (std::int64_t i = threadIdx.x; i < f; i += blockDim.x) {
      const A g = static_cast<A>(dyr[i]) * static_cast<A>(scale[i]);
      sum_g += g;
      sum_g_xhat += g * layer_norm_xhat(static_cast<A>(xr[i]), s);
    }
    const A mean_g = block_sum_all(sum_g) / static_cast<A>(f);
    const A mean_g_xhat = block_sum_all(sum_g_xhat) / static_cast<A>(f);
    for (std::int64_t i = threadIdx.x; i < f; i += blockDim.x)
      dx[r * f + i] = store_as<T>(layer_norm_dx(static_cast<A>(dyr[i]) * static_cast<A>(scale[i]),
                                                layer_norm_xhat(static_cast<A>(xr[i]), s), mean_g,
                                                mean_g_xhat, s.rstd));
  }
}

// Per-row statistics into mean[r] and rstd[r] (float32 for every element type but f64).
template <class T>
__global__ void layer_norm_stats_kernel(const T* x, std::int64_t rows, std::int64_t f,
                                        compute_t<T> epsilon, compute_t<T>* mean,
                                        compute_t<T>* rstd) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const auto s = block_row_stats(x + r * f, f, epsilon);
    if (threadIdx.x == 0) {
      mean[r] = s.mean;
      rstd[r] = s.rstd;
    }
  }
}

// dscale[c] = sum over rows of dy[r, c] * xhat[r, c], from the per-row statistics, laid out as
// reduce_columns_kernel (launch_geometry.hpp's plan_column_reduce): block (column block, chunk)
// sums rows [chunk * rows_per_chunk, ...) of kColumns columns in a fixed order into
// out[chunk, c] — dscale itself with one chunk, else partials (in the accumulation type) for
// launch_reduce_columns to sum.
template <class T, class Out>
__global__ void layer_norm_dscale_kernel(const T* x, const T* dy, const compute_t<T>* mean,
                                         const compute_t<T>* rstd, std::int64_t rows,
                                         std::int64_t f, std::int64_t rows_per_chunk, Out* out) {
  using A = compute_t<T>;
  __shared__ A partial[kRowLanes][kColumns];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * rows_per_chunk;
  const std::int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  A acc = 0;
  if (c < f)
    for (std::int64_t r = begin + threadIdx.y; r < end; r += kRowLanes)
      acc += static_cast<A>(dy[r * f + c]) *
             layer_norm_xhat(static_cast<A>(x[r * f + c]), LayerNormStats<A>{mean[r], rstd[r]});
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < f) {
    for (int lane = 1; lane < kRowLanes; ++lane)
      acc += partial[lane][threadIdx.x];
    out[static_cast<std::int64_t>(blockIdx.y) * f + c] = store_as<Out>(acc);
  }
}

// ---- launchers: raw pointers, sizes and a stream; each returns its launch's error -------

// One block per row, grid-stride past kMaxGridBlocks rows.
inline unsigned row_blocks(std::int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : (rows > kMaxGridBlocks ? kMaxGridBlocks : rows));
}

// y (rows, f) = LayerNorm of x (rows, f) with scale and bias (f).
template <class T>
cudaError_t launch_layer_norm(const T* x, const T* scale, const T* bias, std::int64_t rows,
                              std::int64_t f, compute_t<T> epsilon, T* y, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  layer_norm_kernel<<<row_blocks(rows), kBlockThreads, 0, stream>>>(x, scale, bias, rows, f,
                                                                   epsilon, y);
  return cudaGetLastError();
}

// dx (rows, f) of LayerNorm for dy (rows, f), x and scale (f).
template <class T>
cudaError_t launch_layer_norm_dx(const T* x, const T* scale, const T* dy, std::int64_t rows,
                                 std::int64_t f, compute_t<T> epsilon, T* dx,
                                 cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  layer_norm_dx_kernel<<<row_blocks(rows), kBlockThreads, 0, stream>>>(x, scale, dy, rows, f,
                                                                      epsilon, dx);
  return cudaGetLastError();
}

// mean and rstd (rows each, in the accumulation type) of x (rows, f).
template <class T>
cudaError_t launch_layer_norm_stats(const T* x, std::int64_t rows, std::int64_t f,
                                    compute_t<T> epsilon, compute_t<T>* mean, compute_t<T>* rstd,
                                    cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  layer_norm_stats_kernel<<<row_blocks(rows), kBlockThreads, 0, stream>>>(x, rows, f, epsilon,
                                                                         mean, rstd);
  return cudaGetLastError();
}

// out (plan.chunks, f): dscale with one chunk, else partial sums over the chunks' rows.
template <class T, class Out>
cudaError_t launch_layer_norm_dscale(const T* x, const T* dy, const compute_t<T>* mean,
                                     const compute_t<T>* rstd, std::int64_t rows, std::int64_t f,
                                     const ColumnReducePlan& plan, Out* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.column_blocks), static_cast<unsigned>(plan.chunks));
  layer_norm_dscale_kernel<<<grid, dim3(kColumns, kRowLanes), 0, stream>>>(
      x, dy, mean, rstd, rows, f, plan.rows_per_chunk, out);
  return cudaGetLastError();
}

}  // namespace flaxpp::kernels
