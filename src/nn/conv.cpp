// nn.Conv: conv_general_dilated with Flax's channels-last dimension numbers, then the bias.
#include "flaxpp/nn/conv.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::nn {
namespace {

using Axes = std::vector<std::int64_t>;

Axes ones_if_empty(const Axes& v, std::size_t n) {
  return v.empty() ? Axes(n, 1) : v;
}

}  // namespace

Array Conv::operator()(Scope& s, const Array& x) const {
  const auto fail = [&](const std::string& message) {
    throw ValueError(detail::str("Conv at ", s.path_str(), ": ", message));
  };
  const std::size_t spatial = kernel_size.size();
  if (features <= 0) fail(detail::str("features must be > 0, got ", features));
  if (spatial == 0) fail("kernel_size needs one entry per spatial axis, got none");
  for (const auto* v : {&strides, &input_dilation, &kernel_dilation})
    if (!v->empty() && v->size() != spatial)
      fail(detail::str("strides and dilations need one entry per kernel_size entry (", spatial,
                       ")"));
  if (!is_floating(x.dtype())) fail(detail::str("expected a floating-point input, got ", x.aval()));
  if (x.rank() < static_cast<std::int64_t>(spatial) + 1)
    fail(detail::str("a kernel of ", spatial, " spatial axes needs an input of at least ",
                     spatial + 1, " axes (spatial..., features), got ", x.aval()));
  if (const auto* mode = std::get_if<std::string>(&padding);
      mode && (*mode == "CIRCULAR" || *mode == "CAUSAL"))
    fail(detail::str("padding \"", *mode,
                     "\" is not supported yet; use \"SAME\", \"VALID\" or "
                     "explicit (low, high) pairs"));
  // Flax flattens the batch axes into one (adding one when there is none).
  const Axes dims = x.shape().dims();
  const std::size_t batch_axes = dims.size() - spatial - 1;
  std::int64_t batch = 1;
  for (std::size_t a = 0; a < batch_axes; ++a)
    batch *= dims[a];
  Axes flat{batch};
  flat.insert(flat.end(), dims.end() - static_cast<std::ptrdiff_t>(spatial + 1), dims.end());
  const std::int64_t in_features = dims.back();
  if (feature_group_count < 1 || in_features % feature_group_count != 0)
    fail(detail::str("feature_group_count ", feature_group_count,
                     " must divide the input's features (", in_features, ")"));
  Axes kernel_shape = kernel_size;
  kernel_shape.push_back(in_features / feature_group_count);
  kernel_shape.push_back(features);
  const Array kernel = s.param("kernel", kernel_init, Shape(kernel_shape), param_dtype);
  const Array bias = use_bias ? s.param("bias", bias_init, Shape{features}, param_dtype) : Array();
  const DType compute = dtype.value_or(x.dtype() == param_dtype ? x.dtype() : DType::f32);

  // Flax's _conv_dimension_numbers: batch first, features last, kernel (spatial..., I, O).
  const auto rank = static_cast<std::int64_t>(spatial + 2);
  lax::ConvDimensionNumbers dn{{0, rank - 1}, {rank - 1, rank - 2}, {0, rank - 1}};
  for (std::int64_t a = 0; a < static_cast<std::int64_t>(spatial); ++a) {
    dn.lhs_spec.push_back(a + 1);
    dn.rhs_spec.push_back(a);
    dn.out_spec.push_back(a + 1);
  }
  const Axes window_strides = ones_if_empty(strides, spatial);
  const Axes rhs_dilation = ones_if_empty(kernel_dilation, spatial);
  // jax.lax.conv_general_dilated resolves a padding string against the dilated kernel.
  Axes effective_kernel;
  for (std::size_t a = 0; a < spatial; ++a)
    effective_kernel.push_back(kernel_size[a] == 0 ? 0
                                                   : 1 + rhs_dilation[a] * (kernel_size[a] - 1));
  const Axes in_spatial(flat.begin() + 1, flat.end() - 1);
  Array y = lax::conv_general_dilated(
      reshape(astype(x, compute), flat), astype(kernel, compute),
      {.window_strides = window_strides,
       .padding = lax::resolve_padding(padding, in_spatial, effective_kernel, window_strides),
       .lhs_dilation = ones_if_empty(input_dilation, spatial),
       .rhs_dilation = rhs_dilation,
       .dimension_numbers = dn,
       .feature_group_count = feature_group_count,
       .batch_group_count = 1});
  if (use_bias) y = y + astype(bias, compute);
  Axes out_dims(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(batch_axes));
  out_dims.insert(out_dims.end(), y.shape().dims().begin() + 1, y.shape().dims().end());
  return reshape(y, out_dims);
}

}  // namespace flaxpp::nn
