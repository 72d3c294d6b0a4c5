// flaxpp/io/optimizer_spec.hpp — optimisers written as JSON (refs-format's `optimizer` object,
// also for training configs): {"name": "sgd"|"momentum"|"adam"|"adamw"|"rmsprop",
// "learning_rate": number or schedule object, <optax argument>: value, ...,
// "clip_by_global_norm": number (optional)}.
#pragma once

#include <string>

#include "flaxpp/io/json.hpp"
#include "flaxpp/optim/transform.hpp"

namespace flaxpp::io {

// Throws ParseError naming the path and the accepted keys for a malformed spec.
optim::GradientTransformation optimizer_from_spec(const Json& spec, const std::string& path = "$");
optim::LearningRate learning_rate_from_spec(const Json& spec, const std::string& path);

}  // namespace flaxpp::io
