// nn.Dense: dot_general over the input's last axis and the kernel's first, then the bias.
#include "flaxpp/nn/dense.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::nn {

Array Dense::operator()(Scope& s, const Array& x) const {
  if (features <= 0)
    throw ValueError(
        detail::str("Dense at ", s.path_str(), ": features must be > 0, got ", features));
  if (x.rank() == 0)
    throw ValueError(detail::str("Dense at ", s.path_str(),
                                 ": the input must have at least one axis, got ", x.aval()));
  if (!is_floating(x.dtype()))
    throw ValueError(detail::str("Dense at ", s.path_str(),
                                 ": expected a floating-point input, got ", x.aval()));
  const std::int64_t in_features = x.shape()[-1];
  const Array kernel = s.param("kernel", kernel_init, Shape{in_features, features}, param_dtype);
  const Array bias = use_bias ? s.param("bias", bias_init, Shape{features}, param_dtype) : Array();
  // Flax's promote_dtype: everything in the computation dtype (the common dtype by default).
  const DType compute = dtype.value_or(x.dtype() == param_dtype ? x.dtype() : DType::f32);
  const Array xc = astype(x, compute), kc = astype(kernel, compute);
  Array y = lax::dot_general(xc, kc, {{x.rank() - 1}, {0}, {}, {}});
  if (use_bias) y = y + astype(bias, compute);
  return y;
}

}  // namespace flaxpp::nn
