// flaxpp/ops/sampling.hpp — jax.random's samplers that need array operations beyond the
// random layer's: gumbel and categorical (JAX's Gumbel-max). The draws are the random layer's
// bit-exact uniforms; the rest runs on the logits' device, traced or not, so sampling from a
// model's logits stays where they are.
#pragma once

#include <cstdint>
#include <optional>

#include "flaxpp/core/array.hpp"
#include "flaxpp/random/key.hpp"

namespace flaxpp::random {

// jax.random.gumbel(key, shape, dtype) in JAX's default mode ("low"):
// -log(-log(uniform(key, shape, dtype, minval=tiny, maxval=1))), on `device`. dtype f32 or f64.
Array gumbel(const Key& key, const Shape& shape, DType dtype = DType::f32,
             Device device = Device::cpu());

// jax.random.categorical(key, logits, axis, shape): int32 draws of indices along `axis` of
// logits (unnormalised log-probabilities), as argmax(gumbel(key, ...) + logits) along it, so
// the same key gives JAX's draws. `shape` defaults to logits' shape without `axis`; a given
// one must end with that shape, and its leading axes are independent draws.
Array categorical(const Key& key, const Array& logits, std::int64_t axis = -1,
                  std::optional<Shape> shape = std::nullopt);

}  // namespace flaxpp::random
