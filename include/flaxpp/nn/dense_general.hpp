// flaxpp/nn/dense_general.hpp — nn.DenseGeneral: a linear map contracting any input axes into
// any number of feature axes, with optional leading batch axes that get a kernel each
// (flax/linen/linear.py). Attention's projections use it: kernels (D, H, D/H) for the query,
// key and value, (H, D/H, D) for the output.
#pragma once

#include <optional>
#include <vector>

#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn {

struct DenseGeneral {
  static constexpr const char* name = "DenseGeneral";
  std::vector<std::int64_t> features{};    // the output feature axes (Flax: int or sequence)
  std::vector<std::int64_t> axis{-1};      // the input axes contracted (negative from the end)
  std::vector<std::int64_t> batch_dims{};  // leading input axes 0..k-1 with a kernel each
  // Dense's options, as Flax's DenseGeneral takes them.
  bool use_bias = true;
  std::optional<DType> dtype{};  // none: promote the input, kernel and bias to a common dtype
  DType param_dtype = DType::f32;
  initializers::Initializer kernel_init = initializers::lecun_normal();  // on the flat kernel
  initializers::Initializer bias_init = initializers::zeros();           // on the flat bias

  // x -> (batch..., other input axes..., features...). The kernel (batch..., contracted...,
  // features...) is drawn as Flax draws it: kernel_init on the flat (prod(batch) *
  // prod(contracted), prod(features)) shape, then reshaped; likewise the bias (batch...,
  // features...). Kernel before bias.
  Array operator()(Scope& s, const Array& x) const;
};

}  // namespace flaxpp::nn
