// nn.Conv and nn.ConvTranspose: conv_general_dilated (or lax.conv_transpose) with Flax's
// channels-last dimension numbers over the batch axes flattened into one, then the bias.
#include "flaxpp/nn/conv.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/ops/slicing.hpp"

namespace flaxpp::nn {
namespace {

using Axes = std::vector<std::int64_t>;

Axes ones_if_empty(const Axes& v, std::size_t n) {
  return v.empty() ? Axes(n, 1) : v;
}

// What both modules check and do around their convolution: the input's batch axes flattened
// into one (one added when there is none) and restored, the parameters made in Flax's order,
// everything in the computation dtype, the bias added.
class ConvFrame {
 public:
  ConvFrame(Scope& s, const char* module, const Array& x, std::int64_t features,
            const Axes& kernel_size, std::initializer_list<const Axes*> per_axis,
            const lax::PaddingSpec& padding, bool allow_input_padding)
      : s_(s), module_(module) {
    const std::size_t spatial = kernel_size.size();
    if (features <= 0) fail(detail::str("features must be > 0, got ", features));
    if (spatial == 0) fail("kernel_size needs one entry per spatial axis, got none");
    for (const Axes* v : per_axis)
      if (!v->empty() && v->size() != spatial)
        fail(detail::str("strides and dilations need one entry per kernel_size entry (", spatial,
                         ")"));
    if (!is_floating(x.dtype()))
      fail(detail::str("expected a floating-point input, got ", x.aval()));
    if (x.rank() < static_cast<std::int64_t>(spatial) + 1)
      fail(detail::str("a kernel of ", spatial, " spatial axes needs an input of at least ",
                       spatial + 1, " axes (spatial..., features), got ", x.aval()));
    if (const auto* mode = std::get_if<std::string>(&padding);
        mode && (*mode == "CIRCULAR" || *mode == "CAUSAL") && !allow_input_padding)
      fail(detail::str("padding \"", *mode,
                       "\" is not supported here; use \"SAME\", \"VALID\" or "
                       "explicit (low, high) pairs"));
    dims_ = x.shape().dims();
    batch_axes_ = dims_.size() - spatial - 1;
    std::int64_t batch = 1;
    for (std::size_t a = 0; a < batch_axes_; ++a)
      batch *= dims_[a];
    Axes flat{batch};
    flat.insert(flat.end(), dims_.end() - static_cast<std::ptrdiff_t>(spatial + 1), dims_.end());
    flat_ = reshape(x, flat);
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw ValueError(detail::str(module_, " at ", s_.path_str(), ": ", message));
  }
  std::int64_t in_features() const { return dims_.back(); }
  // Flax's "CIRCULAR" and "CAUSAL" padding, done on the input before a VALID convolution: the
  // dilated kernel's extent less one split (k - 1) / 2 before and k / 2 after, wrapped around
  // (jnp.pad mode="wrap"); or, for one spatial axis, all of it before, zeros.
  void pad_input(const std::string& mode, const Axes& dilated_kernel) {
    if (mode == "CAUSAL" && dilated_kernel.size() != 1)
      fail("padding \"CAUSAL\" is only implemented for one spatial axis (as in Flax)");
    for (std::size_t a = 0; a < dilated_kernel.size(); ++a) {
      const std::int64_t axis = static_cast<std::int64_t>(a) + 1;
      const std::int64_t k = dilated_kernel[a], size = flat_.shape()[axis];
      const std::int64_t before = mode == "CAUSAL" ? k - 1 : (k - 1) / 2;
      const std::int64_t after = mode == "CAUSAL" ? 0 : k / 2;
      if (mode == "CIRCULAR" && (before > size || after > size))
        fail(detail::str("circular padding of ", before, " and ", after, " elements wraps an ",
                         "axis of only ", size, "; use a smaller kernel or dilation"));
      std::vector<Array> parts;
      if (mode == "CAUSAL") {
        Axes zeros_shape = flat_.shape().dims();
        zeros_shape[a + 1] = before;
        parts = {astype(zeros(Shape(zeros_shape)), flat_.dtype()), flat_};
      } else {
        std::vector<Range> head(static_cast<std::size_t>(flat_.rank())), tail = head;
        head[a + 1] = Range{size - before, size};
        tail[a + 1] = Range{0, after};
        parts = {slice(flat_, head), flat_, slice(flat_, tail)};
      }
      flat_ = concatenate(parts, axis);
    }
  }
  // The input's spatial sizes.
  Axes spatial_sizes() const {
    return Axes(flat_.shape().dims().begin() + 1, flat_.shape().dims().end() - 1);
  }
  // The flattened input in the computation dtype `compute`.
  Array input(DType compute) const { return astype(flat_, compute); }
  // y (batch, spatial'..., features) plus the bias, with the input's batch axes again.
  Array finish(Array y, const Array& bias, DType compute) const {
    if (bias.valid()) y = y + astype(bias, compute);
    Axes out(dims_.begin(), dims_.begin() + static_cast<std::ptrdiff_t>(batch_axes_));
    out.insert(out.end(), y.shape().dims().begin() + 1, y.shape().dims().end());
    return reshape(y, out);
  }

 private:
  Scope& s_;
  const char* module_;
  Axes dims_;
  std::size_t batch_axes_ = 0;
  Array flat_;
};

// Flax's _conv_dimension_numbers: batch first, features last, kernel (spatial..., I, O).
lax::ConvDimensionNumbers channels_last(std::size_t spatial) {
  const auto rank = static_cast<std::int64_t>(spatial + 2);
  lax::ConvDimensionNumbers dn{{0, rank - 1}, {rank - 1, rank - 2}, {0, rank - 1}};
  for (std::int64_t a = 0; a < static_cast<std::int64_t>(spatial); ++a) {
    dn.lhs_spec.push_back(a + 1);
    dn.rhs_spec.push_back(a);
    dn.out_spec.push_back(a + 1);
  }
  return dn;
}

}  // namespace

Array Conv::operator()(Scope& s, const Array& x) const {
  ConvFrame frame(s, "Conv", x, features, kernel_size,
                  {&strides, &input_dilation, &kernel_dilation}, padding, true);
  const std::size_t spatial = kernel_size.size();
  if (feature_group_count < 1 || frame.in_features() % feature_group_count != 0)
    frame.fail(detail::str("feature_group_count ", feature_group_count,
                           " must divide the input's features (", frame.in_features(), ")"));
  Axes kernel_shape = kernel_size;
  kernel_shape.push_back(frame.in_features() / feature_group_count);
  kernel_shape.push_back(features);
  const Array kernel = s.param("kernel", kernel_init, Shape(kernel_shape), param_dtype);
  const Array bias = use_bias ? s.param("bias", bias_init, Shape{features}, param_dtype) : Array();
  const DType compute = dtype.value_or(x.dtype() == param_dtype ? x.dtype() : DType::f32);
  const Axes window_strides = ones_if_empty(strides, spatial);
  const Axes rhs_dilation = ones_if_empty(kernel_dilation, spatial);
  // jax.lax.conv_general_dilated resolves a padding string against the dilated kernel.
  Axes effective_kernel;
  for (std::size_t a = 0; a < spatial; ++a)
    effective_kernel.push_back(kernel_size[a] == 0 ? 0
                                                   : 1 + rhs_dilation[a] * (kernel_size[a] - 1));
  lax::PaddingSpec conv_padding = padding;
  if (const auto* mode = std::get_if<std::string>(&padding);
      mode && (*mode == "CIRCULAR" || *mode == "CAUSAL")) {
    frame.pad_input(*mode, effective_kernel);
    conv_padding = std::string("VALID");
  }
  const Array y = lax::conv_general_dilated(
      frame.input(compute), astype(kernel, compute),
      {.window_strides = window_strides,
       .padding = lax::resolve_padding(conv_padding, frame.spatial_sizes(), effective_kernel,
                                       window_strides),
       .lhs_dilation = ones_if_empty(input_dilation, spatial),
       .rhs_dilation = rhs_dilation,
       .dimension_numbers = channels_last(spatial),
       .feature_group_count = feature_group_count,
       .batch_group_count = 1});
  return frame.finish(y, bias, compute);
}

Array ConvTranspose::operator()(Scope& s, const Array& x) const {
  const ConvFrame frame(s, "ConvTranspose", x, features, kernel_size, {&strides, &kernel_dilation},
                        padding, false);
  const std::size_t spatial = kernel_size.size();
  Axes kernel_shape = kernel_size;
  kernel_shape.push_back(transpose_kernel ? features : frame.in_features());
  kernel_shape.push_back(transpose_kernel ? frame.in_features() : features);
  const Array kernel = s.param("kernel", kernel_init, Shape(kernel_shape), param_dtype);
  const Array bias = use_bias ? s.param("bias", bias_init, Shape{features}, param_dtype) : Array();
  const DType compute = dtype.value_or(x.dtype() == param_dtype ? x.dtype() : DType::f32);
  const Array y = lax::conv_transpose(
      frame.input(compute), astype(kernel, compute), ones_if_empty(strides, spatial), padding,
      ones_if_empty(kernel_dilation, spatial), channels_last(spatial), transpose_kernel);
  return frame.finish(y, bias, compute);
}

}  // namespace flaxpp::nn
