// flaxpp/nn/dense.hpp — nn.Dense: y = x @ kernel + bias, kernel (in_features, features) created
// from the input's last axis (flax/linen/linear.py; semantics doc §3.5).
#pragma once

#include <optional>

#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn {

struct Dense {
  static constexpr const char* name = "Dense";
  std::int64_t features = 0;
  bool use_bias = true;
  std::optional<DType> dtype{};  // computation dtype; none: the inputs' and params' common dtype
  DType param_dtype = DType::f32;
  initializers::Initializer kernel_init = initializers::lecun_normal();
  initializers::Initializer bias_init = initializers::zeros();

  // x: (..., in_features) -> (..., features). The kernel is drawn before the bias, as in Flax.
  Array operator()(Scope& s, const Array& x) const;
};

}  // namespace flaxpp::nn
