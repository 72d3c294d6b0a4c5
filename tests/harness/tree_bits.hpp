// Compares two float32 trees leaf by leaf for identical paths and bits (the fused optimiser and
// train-step tests, whose results must equal their one-primitive-at-a-time references exactly).
#pragma once

#include <doctest/doctest.h>

#include "flaxpp/core/tree.hpp"

namespace flaxpp::testing {

inline void check_same_bits(const Tree& got, const Tree& want) {
  const auto g = got.flatten(), w = want.flatten();
  REQUIRE(g.size() == w.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    CAPTURE(g[i].first);
    CHECK(g[i].first == w[i].first);
    CHECK(g[i].second.to_vector<float>() == w[i].second.to_vector<float>());
  }
}

}  // namespace flaxpp::testing
