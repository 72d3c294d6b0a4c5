// nn.LayerNorm over the last axis, as flax/linen/normalization.py (_compute_stats with the
// fast variance, _normalize), as one layer_norm primitive (cuDNN's LayerNorm on CUDA). Without
// scale or bias the primitive gets ones or zeros, which leave its values unchanged.
#include "flaxpp/nn/layer_norm.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::nn {

Array LayerNorm::operator()(Scope& s, const Array& x) const {
  if (x.rank() == 0)
    throw ValueError(detail::str("LayerNorm at ", s.path_str(),
                                 ": the input must have at least one axis, got ", x.aval()));
  const std::int64_t features = x.shape()[-1];
  const Array scale =
      use_scale ? astype(s.param("scale", scale_init, Shape{features}, param_dtype), x.dtype())
                : astype(ones(Shape{features}), x.dtype());
  const Array bias =
      use_bias ? astype(s.param("bias", bias_init, Shape{features}, param_dtype), x.dtype())
               : astype(zeros(Shape{features}), x.dtype());
  return lax::layer_norm(x, scale, bias, epsilon);
}

}  // namespace flaxpp::nn
