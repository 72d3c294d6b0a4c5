// nn.LayerNorm over the last axis, as flax/linen/normalization.py (_compute_stats with the
// fast variance, _normalize).
#include "flaxpp/nn/layer_norm.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::nn {

Array LayerNorm::operator()(Scope& s, const Array& x) const {
  if (x.rank() == 0)
    throw ValueError(detail::str("LayerNorm at ", s.path_str(),
                                 ": the input must have at least one axis, got ", x.aval()));
  const Axes axes{x.rank() - 1};
  const std::int64_t features = x.shape()[-1];
  const Array mean_ = mean(x, axes, true);
  const Array var =
      maximum(lax::scalar(0.0, x.dtype()), mean(square(x), axes, true) - square(mean_));
  Array y = x - mean_;
  Array mul = lax::rsqrt(var + epsilon);
  if (use_scale)
    mul = mul * astype(s.param("scale", scale_init, Shape{features}, param_dtype), x.dtype());
  y = y * mul;
  if (use_bias) y = y + astype(s.param("bias", bias_init, Shape{features}, param_dtype), x.dtype());
  return y;
}

}  // namespace flaxpp::nn
