// flaxpp/nn/layer_norm.hpp — nn.LayerNorm over the last axis: (x - mean) * rsqrt(var + eps)
// * scale + bias, with Flax's fast variance E[x^2] - E[x]^2 (flax/linen/normalization.py).
#pragma once

#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn {

struct LayerNorm {
  static constexpr const char* name = "LayerNorm";
  double epsilon = 1e-6;
  bool use_bias = true;
  bool use_scale = true;
  DType param_dtype = DType::f32;
  initializers::Initializer bias_init = initializers::zeros();
  initializers::Initializer scale_init = initializers::ones();

  Array operator()(Scope& s, const Array& x) const;
};

}  // namespace flaxpp::nn
