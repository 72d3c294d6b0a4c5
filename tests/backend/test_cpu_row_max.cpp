// The CPU's float32 maximum along the last axes (src/backend/cpu/cpu_row_max.hpp), through
// lax::reduce_max: every row's maximum as kernels::Max defines it, for rows shorter than, equal
// to and longer than the loop's 16 lanes, with the cases its integer keys must get right: zeros
// of both signs (+0 over -0), infinities, empty rows (-inf) and NaN anywhere in a row (NaN). The
// arrays live on the CPU whatever the suite's default device.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/kernels/elementwise.hpp"

using namespace flaxpp;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Rows of `n` values: random ones, then rows with each special case at a position that moves
// from row to row (first, inside the vector loop, in the tail).
std::vector<float> rows_of(std::int64_t n, std::int64_t rows, std::mt19937& gen) {
  std::uniform_real_distribution<float> uniform(-50.0f, 50.0f);
  std::vector<float> x(static_cast<std::size_t>(n * rows));
  for (float& v : x)
    v = uniform(gen);
  const std::vector<std::vector<float>> fills = {
      {-0.0f}, {0.0f, -0.0f}, {-0.0f, -1.0f}, {-kInf}, {kInf, 1.0f}, {-kInf, kNaN}, {kNaN}};
  for (std::int64_t r = 0; r < rows && n > 0; ++r) {
    const std::vector<float>& fill = fills[static_cast<std::size_t>(r) % fills.size()];
    float* row = x.data() + r * n;
    if (r < static_cast<std::int64_t>(fills.size())) {  // the whole row of the case's values
      for (std::int64_t j = 0; j < n; ++j)
        row[j] = fill[static_cast<std::size_t>(j) % fill.size()];
    } else if (r % 2 == 0) {  // one special value in a random row, at a moving position
      row[(r * 7) % n] = fill.back();
    }
  }
  return x;
}

}  // namespace

TEST_CASE("cpu row max: float32 maxima along the last axis as kernels::Max folds them") {
  std::mt19937 gen(7);
  for (const std::int64_t n : {0, 1, 5, 15, 16, 17, 33, 64, 100}) {
    CAPTURE(n);
    const std::int64_t rows = 40;
    const std::vector<float> x = rows_of(n, rows, gen);
    const Array xa = Array::from_vector(x, Shape{rows, n}, Device::cpu());
    const std::vector<float> got = lax::reduce_max(xa, {1}).to_vector<float>();
    REQUIRE(got.size() == static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
      CAPTURE(r);
      float want = kernels::max_identity<float>();
      for (std::int64_t j = 0; j < n; ++j)
        want = kernels::Max{}(want, x[static_cast<std::size_t>(r * n + j)]);
      const float g = got[static_cast<std::size_t>(r)];
      if (std::isnan(want)) {
        CHECK(std::isnan(g));
      } else {
        CHECK(g == want);
        CHECK(std::signbit(g) == std::signbit(want));
      }
    }
  }
}
