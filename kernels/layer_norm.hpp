// kernels/layer_norm.hpp — the per-row math of the layer_norm primitives (Flax's LayerNorm with
// the fast variance), shared by the CPU loops and the CUDA kernels. A is the accumulation type
// (the element type, float for bf16/f16).
#pragma once

#include "flaxpp/kernels/elementwise.hpp"
#include "flaxpp/kernels/hd.hpp"

namespace flaxpp::kernels {

template <class A>
struct LayerNormStats {
  A mean;  // mean(x)
  A rstd;  // rsqrt(max(0, mean(x^2) - mean^2) + epsilon)
};

// From a row's sum and sum of squares over n elements, in Flax's order of operations.
template <class A>
FLAXPP_HD LayerNormStats<A> layer_norm_stats(A sum, A sum_sq, A n, A epsilon) {
  const A mean = sum / n;
  const A var = Max{}(A(0), sum_sq / n - mean * mean);
  return {mean, Rsqrt{}(var + epsilon)};
}

// y = (x - mean) * (rstd * scale) + bias, as Flax's _normalize multiplies.
template <class A>
FLAXPP_HD A layer_norm_y(A x, LayerNormStats<A> s, A scale, A bias) {
  return (x - s.mean) * (s.rstd * scale) + bias;
}

// The normalised input xhat = (x - mean) * rstd.
template <class A>
FLAXPP_HD A layer_norm_xhat(A x, LayerNormStats<A> s) {
  return (x - s.mean) * s.rstd;
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)) for g = dy * scale, given the row's mean(g) and
// mean(g xhat).
template <class A>
FLAXPP_HD A layer_norm_dx(A g, A xhat, A mean_g, A mean_g_xhat, A rstd) {
  return rstd * (g - mean_g - xhat * mean_g_xhat);
}

}  // namespace flaxpp::kernels
