// kernels/elementwise_kernels.cuh — the CUDA kernels of the elementwise primitives: each
// applies one functor of elementwise.hpp (the very code the CPU backend runs) per element,
// in a grid-stride loop. 16-bit floats are read into float, computed, and rounded back.
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"
#include "flaxpp/kernels/elementwise.hpp"

namespace flaxpp::kernels {

// out[i] = op(x[i], y[i]); a 0-d operand (x_scalar / y_scalar) is read at index 0.
template <class Op, class T, class S>
__global__ void binary_kernel(Op op, const T* x, bool x_scalar, const T* y, bool y_scalar, S* out,
                              std::int64_t n) {
  using C = compute_t<T>;
  for (std::int64_t i = grid_index(); i < n; i += grid_stride())
    out[i] =
        store_as<S>(op(static_cast<C>(x[x_scalar ? 0 : i]), static_cast<C>(y[y_scalar ? 0 : i])));
}

// out[i] = op(x[i]).
template <class Op, class T>
__global__ void unary_kernel(Op op, const T* x, T* out, std::int64_t n) {
  using C = compute_t<T>;
  for (std::int64_t i = grid_index(); i < n; i += grid_stride())
    out[i] = store_as<T>(op(static_cast<C>(x[i])));
}

// The same two kernels over 16-bit elements, 16 bytes (Vec<T>) per load and store; every
// non-scalar pointer is kVecBytes-aligned. The elements after the last whole vector go one by
// one.
template <class Op, class T>
__global__ void binary_vec_kernel(Op op, const T* x, bool x_scalar, const T* y, bool y_scalar,
                                  T* out, std::int64_t n) {
  using C = compute_t<T>;
  using V = Vec<T>;
  const C xs = x_scalar ? static_cast<C>(x[0]) : C(0), ys = y_scalar ? static_cast<C>(y[0]) : C(0);
  const std::int64_t n_vec = n / V::kSize;
  for (std::int64_t i = grid_index(); i < n_vec; i += grid_stride()) {
    V a, b, r;
    if (!x_scalar) a = reinterpret_cast<const V*>(x)[i];
    if (!y_scalar) b = reinterpret_cast<const V*>(y)[i];
#pragma unroll
    for (int k = 0; k < V::kSize; ++k)
      r.v[k] = store_as<T>(op(x_scalar ? xs : static_cast<C>(a.v[k]),
                              y_scalar ? ys : static_cast<C>(b.v[k])));
    reinterpret_cast<V*>(out)[i] = r;
  }
  for (std::int64_t i = n_vec * V::kSize + grid_index(); i < n; i += grid_stride())
    out[i] = store_as<T>(op(x_scalar ? xs : static_cast<C>(x[i]), y_scalar ? ys : static_cast<C>(y[i])));
}

template <class Op, class T>
__global__ void unary_vec_kernel(Op op, const T* x, T* out, std::int64_t n) {
  using C = compute_t<T>;
  using V = Vec<T>;
  const std::int64_t n_vec = n / V::kSize;
  for (std::int64_t i = grid_index(); i < n_vec; i += grid_stride()) {
    const V a = reinterpret_cast<const V*>(x)[i];
    V r;
#pragma unroll
    for (int k = 0; k < V::kSize; ++k)
      r.v[k] = store_as<T>(op(static_cast<C>(a.v[k])));
    reinterpret_cast<V*>(out)[i] = r;
  }
  for (std::int64_t i = n_vec * V::kSize + grid_index(); i < n; i += grid_stride())
    out[i] = store_as<T>(op(static_cast<C>(x[i])));
}

// Blocks for a kernel above over n elements: whole vectors plus the elements after them.
template <class T>
unsigned vec_grid_blocks(std::int64_t n) {
  return grid_blocks(n / Vec<T>::kSize + n % Vec<T>::kSize);
}

// convert_element_type: through float for 16-bit types on either side, as ml_dtypes converts
// to bfloat16 (Eigen's bfloat16(double) rounds to float first); float64 to float16 rounds
// once, as numpy's conversion (and round_to_float16_bits) does.
template <class From, class To>
__global__ void convert_kernel(const From* x, To* out, std::int64_t n) {
  using FromC = compute_t<From>;
  // Bool is stored as a byte but converts with bool semantics (x != 0).
  using ToValue = std::conditional_t<std::is_same_v<To, std::uint8_t>, bool, compute_t<To>>;
  const Convert<ToValue> convert;
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    if constexpr (std::is_same_v<From, double> && std::is_same_v<To, __half>) {
      out[i] = __double2half(x[i]);
    } else {
      out[i] = store_as<To>(convert(static_cast<FromC>(x[i])));
    }
  }
}

// select_n with up to kMaxSelectCases cases: out[i] = cases[clamp(which[i])][i]. `which` is
// bool (bytes) or int32, read at index 0 for every element when 0-d; out-of-range values
// pick the first or last case, as XLA does.
inline constexpr int kMaxSelectCases = 8;
template <class T>
struct SelectCases {
  const T* data[kMaxSelectCases];
  int count;
};
template <class W, class T>
__global__ void select_n_kernel(const W* which, bool which_scalar, SelectCases<T> cases, T* out,
                                std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    std::int64_t w = static_cast<std::int64_t>(which[which_scalar ? 0 : i]);
    w = w < 0 ? 0 : (w >= cases.count ? cases.count - 1 : w);
    out[i] = cases.data[w][i];
  }
}


// ---- launchers: raw pointers, sizes and a stream; each returns its launch's error -------

// out[i] = op(x[i], y[i]) for i < n (a 0-d operand read at index 0); 16-bit elements with
// 16-byte loads where every pointer is aligned.
template <class Op, class T, class S>
cudaError_t launch_binary(Op op, const T* x, bool x_scalar, const T* y, bool y_scalar, S* out,
                          std::int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if constexpr (is_half_v<T> && std::is_same_v<S, T>) {
    if ((x_scalar || is_vec_aligned(x)) && (y_scalar || is_vec_aligned(y)) && is_vec_aligned(out)) {
      binary_vec_kernel<<<vec_grid_blocks<T>(n), kBlockThreads, 0, stream>>>(op, x, x_scalar, y,
                                                                             y_scalar, out, n);
      return cudaGetLastError();
    }
  }
  binary_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(op, x, x_scalar, y, y_scalar, out, n);
  return cudaGetLastError();
}

// out[i] = op(x[i]) for i < n; 16-bit elements with 16-byte loads where both are aligned.
template <class Op, class T>
cudaError_t launch_unary(Op op, const T* x, T* out, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if constexpr (is_half_v<T>) {
    if (is_vec_aligned(x) && is_vec_aligned(out)) {
      unary_vec_kernel<<<vec_grid_blocks<T>(n), kBlockThreads, 0, stream>>>(op, x, out, n);
      return cudaGetLastError();
    }
  }
  unary_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(op, x, out, n);
  return cudaGetLastError();
}

template <class From, class To>
cudaError_t launch_convert(const From* x, To* out, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  convert_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(x, out, n);
  return cudaGetLastError();
}

template <class W, class T>
cudaError_t launch_select_n(const W* which, bool which_scalar, const SelectCases<T>& cases, T* out,
                            std::int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  select_n_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(which, which_scalar, cases, out, n);
  return cudaGetLastError();
}

}  // namespace flaxpp::kernels
