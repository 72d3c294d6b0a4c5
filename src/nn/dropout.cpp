// nn.Dropout, as flax/linen/stochastic.py: mask = bernoulli(key, keep_prob, shape) (uniform <
// keep_prob); select(mask, x / keep_prob, 0).
#include "flaxpp/nn/dropout.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "nn/dropout_mask.hpp"

namespace flaxpp::nn {

Array Dropout::operator()(Scope& s, const Array& x) const {
  if (!(rate >= 0.0 && rate <= 1.0))
    throw ValueError(
        detail::str("Dropout at ", s.path_str(), ": rate must be in [0, 1], got ", rate));
  if (rate == 0.0 || deterministic) return x;
  if (rate == 1.0) return lax::zeros_like(x);
  const double keep_prob = 1.0 - rate;
  std::vector<std::int64_t> mask_dims = x.shape().dims();
  for (std::int64_t axis : broadcast_dims)
    mask_dims[x.shape().normalize_axis(axis)] = 1;
  const random::Key key = s.make_rng(rng_collection);
  const Array keep = keep_mask(key, keep_prob, Shape(mask_dims), x);
  const Array mask = broadcast_to(keep, x.shape());
  return lax::select(mask, x / keep_prob, lax::zeros_like(x));
}

}  // namespace flaxpp::nn
