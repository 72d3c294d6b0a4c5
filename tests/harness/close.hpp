// Arrays equal to float64 rounding: two computations of the same values (a scan and its loop
// written out, a checkpointed gradient and the plain one) compared element by element.
#pragma once

#include <doctest/doctest.h>

#include <vector>

#include "flaxpp/core/array.hpp"

namespace flaxpp::testing {

inline void check_close(const std::vector<Array>& got, const std::vector<Array>& want,
                        double epsilon = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const auto a = got[i].to_vector<double>(), b = want[i].to_vector<double>();
    REQUIRE(a.size() == b.size());
    for (std::size_t k = 0; k < a.size(); ++k)
      CHECK(a[k] == doctest::Approx(b[k]).epsilon(epsilon));
  }
}

}  // namespace flaxpp::testing
