// kernels/along_axis_kernels.cuh — argmax, argmin, cumsum, argsort and permute_along_axis on
// the GPU, along the lines of layout_plan.hpp's AxisLines. argmax, argmin and cumsum take one
// thread per line, walking it in order as the CPU does, so that the indices and, for float32
// and float64, the sums are the CPU's bit for bit; adjacent threads take adjacent inner lines,
// so reads coalesce where the axis is not the last. argsort gives each element a thread that
// counts the elements of its line that sort before it (its rank; ties by position, so the
// CPU's stable order): n^2 comparisons for a line of n, no scratch memory and no
// synchronisation, meant for lines of up to a few thousand (vocabularies, top_k of logits).
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"
#include "flaxpp/kernels/arg_reduce.hpp"
#include "flaxpp/kernels/sort_order.hpp"

namespace flaxpp::kernels {

template <class Better, class T>
__global__ void arg_reduce_kernel(const T* in, std::int64_t outer, std::int64_t extent,
                                  std::int64_t inner, std::int32_t* out) {
  const std::int64_t lines = outer * inner;
  for (std::int64_t l = grid_index(); l < lines; l += grid_stride()) {
    const T* line = in + (l / inner) * extent * inner + l % inner;
    compute_t<T> best = static_cast<compute_t<T>>(line[0]);
    std::int32_t index = 0;
    for (std::int64_t j = 1; j < extent; ++j) {
      const auto v = static_cast<compute_t<T>>(line[j * inner]);
      if (Better{}(v, best)) {
        best = v;
        index = static_cast<std::int32_t>(j);
      }
    }
    out[l] = index;
  }
}

// Sums in compute_t (float for 16-bit types), each running sum stored as it is reached.
template <class T>
__global__ void cumsum_kernel(const T* in, std::int64_t outer, std::int64_t extent,
                              std::int64_t inner, bool reverse, T* out) {
  const std::int64_t lines = outer * inner;
  for (std::int64_t l = grid_index(); l < lines; l += grid_stride()) {
    const std::int64_t base = (l / inner) * extent * inner + l % inner;
    compute_t<T> sum{};
    for (std::int64_t step = 0; step < extent; ++step) {
      const std::int64_t at = base + (reverse ? extent - 1 - step : step) * inner;
      sum = step == 0 ? static_cast<compute_t<T>>(in[at]) : sum + static_cast<compute_t<T>>(in[at]);
      out[at] = store_as<T>(sum);
    }
  }
}

template <class T>
__global__ void argsort_kernel(const T* in, std::int64_t outer, std::int64_t extent,
                               std::int64_t inner, bool descending, bool signed_zeros,
                               std::int32_t* out) {
  const std::int64_t n = outer * extent * inner;
  for (std::int64_t e = grid_index(); e < n; e += grid_stride()) {
    const std::int64_t j = (e / inner) % extent;
    const std::int64_t base = e - j * inner;
    const auto key = static_cast<compute_t<T>>(in[e]);
    std::int64_t rank = 0;
    for (std::int64_t m = 0; m < extent; ++m) {
      const auto other = static_cast<compute_t<T>>(in[base + m * inner]);
      const bool before = m < j ? !sorts_before(key, other, descending, signed_zeros)
                                : sorts_before(other, key, descending, signed_zeros);
      rank += before ? 1 : 0;
    }
    out[base + rank * inner] = static_cast<std::int32_t>(j);
  }
}

template <class T>
__global__ void permute_kernel(const T* in, const std::int32_t* permutation, std::int64_t outer,
                               std::int64_t extent, std::int64_t inner, T* out) {
  const std::int64_t n = outer * extent * inner;
  for (std::int64_t e = grid_index(); e < n; e += grid_stride()) {
    const std::int64_t j = (e / inner) % extent;
    std::int64_t p = permutation[e];
    p = p < 0 ? 0 : (p >= extent ? extent - 1 : p);
    out[e] = in[e + (p - j) * inner];
  }
}

// ---- launchers: raw pointers, sizes and a stream; each returns its launch's error -------

template <class Better, class T>
cudaError_t launch_arg_reduce(const T* in, std::int64_t outer, std::int64_t extent,
                              std::int64_t inner, std::int32_t* out, cudaStream_t stream) {
  const std::int64_t lines = outer * inner;
  if (lines == 0) return cudaSuccess;
  arg_reduce_kernel<Better>
      <<<grid_blocks(lines), kBlockThreads, 0, stream>>>(in, outer, extent, inner, out);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_cumsum(const T* in, std::int64_t outer, std::int64_t extent, std::int64_t inner,
                          bool reverse, T* out, cudaStream_t stream) {
  const std::int64_t lines = outer * inner;
  if (lines == 0 || extent == 0) return cudaSuccess;
  cumsum_kernel<<<grid_blocks(lines), kBlockThreads, 0, stream>>>(in, outer, extent, inner, reverse,
                                                                  out);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_argsort(const T* in, std::int64_t outer, std::int64_t extent, std::int64_t inner,
                           bool descending, bool signed_zeros, std::int32_t* out,
                           cudaStream_t stream) {
  const std::int64_t n = outer * extent * inner;
  if (n == 0) return cudaSuccess;
  argsort_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(in, outer, extent, inner, descending,
                                                               signed_zeros, out);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_permute(const T* in, const std::int32_t* permutation, std::int64_t outer,
                           std::int64_t extent, std::int64_t inner, T* out, cudaStream_t stream) {
  const std::int64_t n = outer * extent * inner;
  if (n == 0) return cudaSuccess;
  permute_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(in, permutation, outer, extent,
                                                               inner, out);
  return cudaGetLastError();
}

}  // namespace flaxpp::kernels
