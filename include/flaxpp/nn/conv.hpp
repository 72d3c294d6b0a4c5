// flaxpp/nn/conv.hpp — nn.Conv: a convolution over the spatial axes between the batch axes and
// the features (channels last), kernel (*kernel_size, in_features / feature_group_count,
// features); nn.ConvTranspose: lax.conv_transpose, kernel (*kernel_size, in_features, features)
// (flax/linen/linear.py).
#pragma once

#include <optional>
#include <vector>

#include "flaxpp/ir/lax_convolution.hpp"
#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn {

struct Conv {
  static constexpr const char* name = "Conv";
  std::int64_t features = 0;
  std::vector<std::int64_t> kernel_size{};
  std::vector<std::int64_t> strides{};  // all 1 where empty
  // "SAME" (Flax's default), "SAME_LOWER", "VALID", one (low, high) pair per spatial axis, or
  // Flax's "CIRCULAR" (the input wrapped around) and "CAUSAL" (one spatial axis, zeros before).
  lax::PaddingSpec padding = std::string("SAME");
  std::vector<std::int64_t> input_dilation{}, kernel_dilation{};  // all 1 where empty
  std::int64_t feature_group_count = 1;
  bool use_bias = true;
  std::optional<DType> dtype{};  // computation dtype; none: the inputs' and params' common dtype
  DType param_dtype = DType::f32;
  initializers::Initializer kernel_init = initializers::lecun_normal();
  initializers::Initializer bias_init = initializers::zeros();

  // x: (batch..., spatial..., in_features), one spatial axis per kernel_size entry, any number
  // of batch axes (none: one is added and removed, as in Flax) ->
  // (batch..., spatial'..., features). The kernel is drawn before the bias.
  Array operator()(Scope& s, const Array& x) const;
};

// Flax's ConvTranspose: the input dilated by the strides, convolved with the kernel (reversed
// and with its feature axes swapped when transpose_kernel, i.e. the gradient of a Conv with
// that kernel). "SAME" / "VALID" padding is the forward convolution's (JAX's
// _conv_transpose_padding); pairs pad the dilated input.
struct ConvTranspose {
  static constexpr const char* name = "ConvTranspose";
  std::int64_t features = 0;
  std::vector<std::int64_t> kernel_size{};
  std::vector<std::int64_t> strides{};  // all 1 where empty
  lax::PaddingSpec padding = std::string("SAME");
  std::vector<std::int64_t> kernel_dilation{};  // all 1 where empty
  bool use_bias = true;
  bool transpose_kernel = false;
  std::optional<DType> dtype{};
  DType param_dtype = DType::f32;
  initializers::Initializer kernel_init = initializers::lecun_normal();
  initializers::Initializer bias_init = initializers::zeros();

  Array operator()(Scope& s, const Array& x) const;
};

}  // namespace flaxpp::nn
