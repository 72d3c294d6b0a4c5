// kernels/along_axis_kernels.cuh — argmax, argmin and cumsum on the GPU: one thread per line
// along the axis (layout_plan.hpp's AxisLines), walking it in order as the CPU does, so that
// the indices and, for float32 and float64, the sums are the CPU's bit for bit. Adjacent
// threads take adjacent inner lines, so reads coalesce where the axis is not the last.
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"
#include "flaxpp/kernels/arg_reduce.hpp"

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

}  // namespace flaxpp::kernels
