// kernels/window_kernels.cuh — conv_general_dilated, reduce_window_sum / reduce_window_max and
// select_and_scatter_add on the GPU: one thread per result element, each computed by
// flaxpp/kernels/window.hpp (the reductions in the CPU's order, so float32 and float64 results
// are the CPU's bit for bit), accumulating in compute_t. A direct convolution: correct for every
// dimension-number, dilation and group combination, not fast (the CPU's im2col sums in another
// order); cuDNN's convolution graphs are to replace it for the common layouts.
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"
#include "flaxpp/kernels/window.hpp"

namespace flaxpp::kernels {

template <class T>
__global__ void conv_kernel(ConvGeometry g, const T* lhs, const T* rhs, T* out) {
  for (std::int64_t i = grid_index(); i < g.count; i += grid_stride())
    conv_element<compute_t<T>>(g, lhs, rhs, out, i);
}

template <bool kMax, class T>
__global__ void reduce_window_kernel(WindowGeometry g, const T* x, std::int64_t n, T* out) {
  using Acc = compute_t<T>;
  const Acc init = kMax ? -static_cast<Acc>(INFINITY) : Acc(0);
  for (std::int64_t i = grid_index(); i < n; i += grid_stride())
    out[i] = static_cast<T>(reduce_window_element<kMax>(g, x, i, init));
}

template <class T>
__global__ void select_and_scatter_kernel(WindowGeometry g, const T* source, const T* operand,
                                          std::int64_t n, T* out) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride())
    out[i] = static_cast<T>(select_and_scatter_element<compute_t<T>>(g, source, operand, i));
}

template <class T>
cudaError_t launch_conv(const ConvGeometry& g, const T* lhs, const T* rhs, T* out,
                        cudaStream_t stream) {
  if (g.count == 0) return cudaSuccess;
  conv_kernel<<<grid_blocks(g.count), kBlockThreads, 0, stream>>>(g, lhs, rhs, out);
  return cudaGetLastError();
}

template <bool kMax, class T>
cudaError_t launch_reduce_window(const WindowGeometry& g, const T* x, std::int64_t n, T* out,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  reduce_window_kernel<kMax><<<grid_blocks(n), kBlockThreads, 0, stream>>>(g, x, n, out);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_select_and_scatter(const WindowGeometry& g, const T* source, const T* operand,
                                      std::int64_t n, T* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  select_and_scatter_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(g, source, operand, n,
                                                                          out);
  return cudaGetLastError();
}

}  // namespace flaxpp::kernels
