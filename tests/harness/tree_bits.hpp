// Compares two trees leaf by leaf for identical paths, avals and values (the fused optimiser
// and train-step tests, whose results must equal their one-primitive-at-a-time references
// exactly; optimiser states hold int32 counts beside float leaves).
#pragma once

#include <doctest/doctest.h>

#include <cstdint>

#include "flaxpp/core/tree.hpp"

namespace flaxpp::testing {

inline void check_same_values(const Array& got, const Array& want) {
  REQUIRE(got.aval() == want.aval());
  if (got.dtype() == DType::i32)
    CHECK(got.to_vector<std::int32_t>() == want.to_vector<std::int32_t>());
  else
    CHECK(got.to_vector<float>() == want.to_vector<float>());
}

inline void check_same_bits(const Tree& got, const Tree& want) {
  const auto g = got.flatten(), w = want.flatten();
  REQUIRE(g.size() == w.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    CAPTURE(g[i].first);
    CHECK(g[i].first == w[i].first);
    check_same_values(g[i].second, w[i].second);
  }
}

}  // namespace flaxpp::testing
