// flaxpp/nn/dropout.hpp — nn.Dropout: zero each element with probability `rate` and scale the
// rest by 1/(1-rate), using a key from the "dropout" rng stream; the same masks as Flax draws
// for the same keys (random.bernoulli: uniform < keep_prob).
#pragma once

#include <string>
#include <vector>

#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn {

struct Dropout {
  static constexpr const char* name = "Dropout";
  double rate = 0.0;
  bool deterministic = false;
  std::vector<std::int64_t> broadcast_dims{};  // axes sharing one mask value
  std::string rng_collection = "dropout";

  Array operator()(Scope& s, const Array& x) const;
};

}  // namespace flaxpp::nn
