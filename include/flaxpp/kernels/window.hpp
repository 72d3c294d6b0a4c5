// flaxpp/kernels/window.hpp — the windowed primitives' arithmetic for the CPU and CUDA alike,
// from geometry the backends fill once per call (src/backend/window_plan.hpp): where a window
// position reads (window_source, window_element, both backends' only index arithmetic), one
// result element of reduce_window_sum / reduce_window_max and select_and_scatter_add (the same
// order of sums on both, so their float32 and float64 results agree bit for bit), and one of
// conv_general_dilated as a direct sum (CUDA's kernel; the CPU gathers the same windows for
// im2col + a matrix product, another summation order).
//
// The window walks its positions in row-major order; a position that falls into padding or
// into the holes of a base (lhs) dilation contributes nothing. Accumulation is in Acc (the
// element type, float for 16-bit storage types).
#ifndef FLAXPP_KERNELS_WINDOW_HPP
#define FLAXPP_KERNELS_WINDOW_HPP

#include <cstdint>

#include "flaxpp/kernels/hd.hpp"

namespace flaxpp::kernels {

// The most axes a window may have (spatial axes of a convolution, all axes of a reduction).
inline constexpr int kMaxWindowRank = 8;

// Where window position k of the result at `out` reads along one axis of an operand of `size`
// elements, dilated by `base_dilation` and padded by `pad_low` in front: the element's index,
// or -1 for padding or a dilation hole.
FLAXPP_HD std::int64_t window_source(std::int64_t out, std::int64_t k, std::int64_t stride,
                                     std::int64_t window_dilation, std::int64_t pad_low,
                                     std::int64_t base_dilation, std::int64_t size) {
  const std::int64_t d = out * stride + k * window_dilation - pad_low;
  if (base_dilation == 1) return d >= 0 && d < size ? d : -1;  // no division in the common case
  if (d < 0 || d % base_dilation != 0) return -1;
  const std::int64_t i = d / base_dilation;
  return i < size ? i : -1;
}

// conv_general_dilated over operands and a result in any axis order (the dimension numbers
// turned into element strides). The result's feature f belongs to group f / out_per_group:
// with feature groups, the group's slice of input features; with batch groups, the group's
// slice of the input batch (examples group * out_batch + n).
struct ConvGeometry {
  int spatial = 0;
  std::int64_t out_batch = 0, out_features = 0, in_features = 0;  // in_features: per group
  std::int64_t out_per_group = 1;
  bool batch_grouped = false;
  std::int64_t lhs_batch_stride = 0, lhs_feature_stride = 0, rhs_out_stride = 0, rhs_in_stride = 0,
               out_batch_stride = 0, out_feature_stride = 0;
  std::int64_t lhs_size[kMaxWindowRank] = {}, lhs_stride[kMaxWindowRank] = {};
  std::int64_t window[kMaxWindowRank] = {}, rhs_stride[kMaxWindowRank] = {};
  std::int64_t out_size[kMaxWindowRank] = {}, out_stride[kMaxWindowRank] = {};
  std::int64_t window_stride[kMaxWindowRank] = {}, pad_low[kMaxWindowRank] = {};
  std::int64_t lhs_dilation[kMaxWindowRank] = {}, rhs_dilation[kMaxWindowRank] = {};
  std::int64_t count = 0;  // result elements
};

// Result element `i` of the convolution, counted in the order (batch, spatial position
// row-major, feature), computed and stored at its place in `out`.
template <class Acc, class T>
FLAXPP_HD void conv_element(const ConvGeometry& g, const T* lhs, const T* rhs, T* out,
                            std::int64_t i) {
  const std::int64_t f = i % g.out_features;
  std::int64_t rest = i / g.out_features;
  std::int64_t position[kMaxWindowRank];
  std::int64_t out_offset = f * g.out_feature_stride;
  for (int s = g.spatial - 1; s >= 0; --s) {
    position[s] = rest % g.out_size[s];
    rest /= g.out_size[s];
    out_offset += position[s] * g.out_stride[s];
  }
  const std::int64_t n = rest;
  out_offset += n * g.out_batch_stride;
  const std::int64_t group = f / g.out_per_group;
  const T* lhs_base = lhs + (g.batch_grouped ? (group * g.out_batch + n) * g.lhs_batch_stride
                                             : n * g.lhs_batch_stride +
                                                   group * g.in_features * g.lhs_feature_stride);
  const T* rhs_base = rhs + f * g.rhs_out_stride;
  std::int64_t k[kMaxWindowRank] = {};
  Acc acc = Acc(0);
  for (;;) {
    std::int64_t lhs_offset = 0, rhs_offset = 0;
    bool inside = true;
    for (int s = 0; s < g.spatial && inside; ++s) {
      const std::int64_t e = window_source(position[s], k[s], g.window_stride[s], g.rhs_dilation[s],
                                           g.pad_low[s], g.lhs_dilation[s], g.lhs_size[s]);
      inside = e >= 0;
      lhs_offset += e * g.lhs_stride[s];
      rhs_offset += k[s] * g.rhs_stride[s];
    }
    if (inside)
      for (std::int64_t c = 0; c < g.in_features; ++c)
        acc += static_cast<Acc>(lhs_base[lhs_offset + c * g.lhs_feature_stride]) *
               static_cast<Acc>(rhs_base[rhs_offset + c * g.rhs_in_stride]);
    int s = g.spatial - 1;
    while (s >= 0 && ++k[s] == g.window[s])
      k[s--] = 0;
    if (s < 0) break;
  }
  out[out_offset] = static_cast<T>(acc);
}

// A reduction over windows of a row-major operand of `rank` axes into a row-major result.
struct WindowGeometry {
  int rank = 0;
  std::int64_t in_size[kMaxWindowRank] = {}, out_size[kMaxWindowRank] = {};
  std::int64_t window[kMaxWindowRank] = {}, stride[kMaxWindowRank] = {};
  std::int64_t pad_low[kMaxWindowRank] = {};
  std::int64_t base_dilation[kMaxWindowRank] = {}, window_dilation[kMaxWindowRank] = {};
};

// Row-major index `linear` as a position of `size`.
FLAXPP_HD void unravel(std::int64_t linear, const std::int64_t* size, int rank,
                       std::int64_t* position) {
  for (int a = rank - 1; a >= 0; --a) {
    position[a] = linear % size[a];
    linear /= size[a];
  }
}

// The offset of the operand element that window position k of result `out` reads, or -1.
FLAXPP_HD std::int64_t window_element(const WindowGeometry& g, const std::int64_t* out,
                                      const std::int64_t* k) {
  std::int64_t offset = 0;
  for (int a = 0; a < g.rank; ++a) {
    const std::int64_t i = window_source(out[a], k[a], g.stride[a], g.window_dilation[a],
                                         g.pad_low[a], g.base_dilation[a], g.in_size[a]);
    if (i < 0) return -1;
    offset = offset * g.in_size[a] + i;
  }
  return offset;
}

// The next window position in row-major order; false after the last.
FLAXPP_HD bool next_window_position(const WindowGeometry& g, std::int64_t* k) {
  int a = g.rank - 1;
  while (a >= 0 && ++k[a] == g.window[a])
    k[a--] = 0;
  return a >= 0;
}

// One element into a window's sum, or its maximum (NaN winning, as lax.max).
template <bool kMax, class Acc>
FLAXPP_HD void window_accumulate(Acc& acc, Acc v) {
  if constexpr (kMax) {
    if (v > acc || v != v) acc = acc != acc ? acc : v;
  } else {
    acc += v;
  }
}

// The sum (reduce_window_sum) or the largest element (reduce_window_max) of the window of
// result `linear`; padding counts as `init` (0 for the sum, -inf for the max).
template <bool kMax, class Acc, class T>
FLAXPP_HD Acc reduce_window_element(const WindowGeometry& g, const T* x, std::int64_t linear,
                                    Acc init) {
  std::int64_t out[kMaxWindowRank], k[kMaxWindowRank] = {};
  unravel(linear, g.out_size, g.rank, out);
  Acc acc = init;
  do {
    const std::int64_t e = window_element(g, out, k);
    if (e >= 0) window_accumulate<kMax>(acc, static_cast<Acc>(x[e]));
  } while (next_window_position(g, k));
  return acc;
}

// The operand element XLA's select_and_scatter with select `ge` picks in the window of result
// `out`: the first element, replaced by each later one it is not >= to; -1 for a window
// wholly in padding.
template <class Acc, class T>
FLAXPP_HD std::int64_t selected_element(const WindowGeometry& g, const T* operand,
                                        const std::int64_t* out) {
  std::int64_t k[kMaxWindowRank] = {}, selected = -1;
  do {
    const std::int64_t e = window_element(g, out, k);
    if (e < 0) continue;
    if (selected < 0 || !(static_cast<Acc>(operand[selected]) >= static_cast<Acc>(operand[e])))
      selected = e;
  } while (next_window_position(g, k));
  return selected;
}

// select_and_scatter_add (no dilation): element `linear` of the operand-shaped result, the sum
// of source over the windows that select it, taken in the windows' row-major order (so the
// sum is the one a scatter in that order makes).
template <class Acc, class T>
FLAXPP_HD Acc select_and_scatter_element(const WindowGeometry& g, const T* source, const T* operand,
                                         std::int64_t linear) {
  std::int64_t in[kMaxWindowRank], first[kMaxWindowRank], last[kMaxWindowRank];
  unravel(linear, g.in_size, g.rank, in);
  for (int a = 0; a < g.rank; ++a) {
    // The results whose window covers `in`: out * stride - pad_low + k = in, 0 <= k < window.
    const std::int64_t hi = in[a] + g.pad_low[a];
    const std::int64_t lo = hi - g.window[a] + 1;
    first[a] = lo <= 0 ? 0 : (lo + g.stride[a] - 1) / g.stride[a];
    last[a] = hi < 0 ? -1 : hi / g.stride[a];
    if (last[a] >= g.out_size[a]) last[a] = g.out_size[a] - 1;
    if (first[a] > last[a]) return Acc(0);
  }
  std::int64_t out[kMaxWindowRank];
  for (int a = 0; a < g.rank; ++a)
    out[a] = first[a];
  Acc acc = Acc(0);
  for (;;) {
    if (selected_element<Acc>(g, operand, out) == linear) {
      std::int64_t o = 0;
      for (int a = 0; a < g.rank; ++a)
        o = o * g.out_size[a] + out[a];
      acc += static_cast<Acc>(source[o]);
    }
    int a = g.rank - 1;
    while (a >= 0 && out[a] == last[a]) {
      out[a] = first[a];
      --a;
    }
    if (a < 0) return acc;
    ++out[a];
  }
}

}  // namespace flaxpp::kernels

#endif  // FLAXPP_KERNELS_WINDOW_HPP
