// Private to nn: the keep mask of a dropout (Dropout, attention's), placed where the masked
// array is.
#pragma once

#include "flaxpp/random/distributions.hpp"

namespace flaxpp::nn {

// bernoulli(key, keep_prob, shape), on x's device (the default device while x is traced). A
// traced key draws inside the trace: the mask is then traced itself and already there.
inline Array keep_mask(const random::Key& key, double keep_prob, const Shape& shape,
                       const Array& x) {
  const Array keep = random::bernoulli(key, keep_prob, shape);
  if (keep.is_traced()) return keep;
  return keep.to(x.is_traced() ? default_device() : x.device());
}

}  // namespace flaxpp::nn
