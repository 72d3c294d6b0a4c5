// flaxpp/ops/activations.hpp — jax.nn's activation and normalisation functions, with JAX's
// formulas (and jax.nn.relu's custom gradient).
#pragma once

#include <cstdint>

#include "flaxpp/ops/numpy.hpp"

namespace flaxpp {

// max(x, 0); gradient 0 at x == 0 (jax.nn.relu's custom JVP).
Array relu(const Array& x);
Array sigmoid(const Array& x);  // logistic
Array silu(const Array& x);     // x * sigmoid(x)
// jax.nn.gelu: the tanh approximation by default, the exact erf form with approximate=false.
Array gelu(const Array& x, bool approximate = true);
Array softmax(const Array& x, std::int64_t axis = -1);
Array log_softmax(const Array& x, std::int64_t axis = -1);
Array logsumexp(const Array& x, std::optional<Axes> axes = std::nullopt, bool keepdims = false);

}  // namespace flaxpp
