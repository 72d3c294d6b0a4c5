// Samplers: JAX's documented outputs, and the invariants of each distribution.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "flaxpp/random/distributions.hpp"
#include "flaxpp/kernels/special_math.hpp"

using namespace flaxpp;

TEST_CASE("uniform: jax.random.uniform(key(0), (3,)) and uniform(key(42), (6,)) exactly") {
  CHECK(random::uniform(random::key(0), Shape{3}).to_vector<float>() ==
        std::vector<float>{0.947667f, 0.9785799f, 0.33229148f});
  CHECK(random::uniform(random::key(42), Shape{6}).to_vector<float>() ==
        std::vector<float>{0.488709569f, 0.679797173f, 0.616271496f, 0.561016083f, 0.450644612f,
                           0.585865855f});
}

TEST_CASE("uniform: values stay in [minval, maxval) for odd ranges and 0-d shapes") {
  const auto v =
      random::uniform(random::key(3), Shape{4097}, DType::f32, -3.3, 2.2).to_vector<float>();
  for (float x : v) {
    CHECK(x >= -3.3f);
    CHECK(x < 2.2f);
  }
  const Array s = random::uniform(random::key(3), Shape{});
  CHECK(s.shape() == Shape{});
  CHECK(s.size() == 1);
}

// Expected values printed by jax.random.randint with JAX 0.10.2 (x64 off); tests/refs/random.json
// holds more cases.
TEST_CASE("randint: jax.random.randint(key(0), ...) exactly, int32 and uint32") {
  const random::Key k = random::key(0);
  CHECK(random::randint(k, Shape{5}, 0, 10).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{9, 0, 2, 3, 1});
  CHECK(random::randint(k, Shape{5}, -2147483648LL, 2147483647).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{-2116156571, -2057756336, 349724616, -593401283, -1189543933});
  const std::vector<std::uint32_t> u{27077, 27312, 8264, 82365, 39715};
  CHECK(random::randint(k, Shape{5}, 0, 100000, DType::u32).to_vector<std::uint32_t>() == u);
  // A negative bound is clipped to 0 for uint32.
  CHECK(random::randint(k, Shape{5}, -5, 100000, DType::u32).to_vector<std::uint32_t>() == u);
}

TEST_CASE("randint: values in [minval, maxval); maxval <= minval gives minval") {
  for (const auto& [lo, hi] : {std::pair{-3, 4}, std::pair{0, 70000}, std::pair{100, 101}}) {
    const auto v = random::randint(random::key(7), Shape{4, 250}, lo, hi).to_vector<std::int32_t>();
    CHECK(*std::min_element(v.begin(), v.end()) >= lo);
    CHECK(*std::max_element(v.begin(), v.end()) < hi);
  }
  const Array same = random::randint(random::key(1), Shape{3}, 5, 2);
  CHECK(same.dtype() == DType::i32);
  CHECK(same.to_vector<std::int32_t>() == std::vector<std::int32_t>{5, 5, 5});
  CHECK(random::randint(random::key(1), Shape{0}, 0, 3).size() == 0);
  CHECK(random::randint(random::key(1), Shape{}, 0, 3).rank() == 0);
}

TEST_CASE("randint: bounds beyond int32 and non-integer dtypes are refused, as in JAX") {
  CHECK_THROWS_WITH_AS(random::randint(random::key(0), Shape{2}, 0, 2147483648LL),
                       doctest::Contains("maxval 2147483648 does not fit int32"), ValueError);
  CHECK_THROWS_WITH_AS(random::randint(random::key(0), Shape{2}, -2147483649LL, 0),
                       doctest::Contains("minval -2147483649 does not fit int32"), ValueError);
  CHECK_THROWS_WITH_AS(random::randint(random::key(0), Shape{2}, 0, 3, DType::f32),
                       doctest::Contains("dtype float32 is not supported; int32 and uint32 are"),
                       ValueError);
}

TEST_CASE("normal: finite draws with mean ~0 and variance ~1") {
  const auto v = random::normal(random::key(11), Shape{100000}).to_vector<float>();
  double sum = 0, sq = 0;
  for (float x : v) {
    REQUIRE(std::isfinite(x));
    sum += x;
    sq += double(x) * x;
  }
  const double mean = sum / double(v.size());
  CHECK(std::abs(mean) < 0.02);
  CHECK(std::abs(sq / double(v.size()) - mean * mean - 1.0) < 0.02);
}

TEST_CASE("truncated_normal: every draw lies strictly inside (lower, upper)") {
  for (auto [lo, hi] : {std::pair{-2.0, 2.0}, std::pair{0.0, 3.0}, std::pair{-0.5, 0.25}}) {
    const auto v = random::truncated_normal(random::key(2), lo, hi, Shape{5000}).to_vector<float>();
    for (float x : v) {
      CHECK(x > static_cast<float>(lo));
      CHECK(x < static_cast<float>(hi));
    }
  }
}

TEST_CASE("samplers: float64 and half dtypes are refused with a clear message") {
  CHECK_THROWS_WITH_AS(random::normal(random::key(0), Shape{2}, DType::f64),
                       doctest::Contains("float32 is"), ValueError);
  CHECK_THROWS_AS(random::uniform(random::key(0), Shape{2}, DType::bf16), ValueError);
}

TEST_CASE("xla_erf_f32: within 4 ulp of erf, saturating to ±1, odd") {
  for (float x = -4.0f; x <= 4.0f; x += 0.03125f) {
    const float got = kernels::xla_erf_f32(x);
    const auto want = static_cast<float>(std::erf(double(x)));
    CHECK(std::abs(got - want) <=
          4 * std::numeric_limits<float>::epsilon() * std::max(std::abs(want), 1e-3f));
    CHECK(kernels::xla_erf_f32(-x) == -got);
  }
  CHECK(kernels::xla_erf_f32(10.0f) == 1.0f);
  CHECK(kernels::xla_erf_f32(-std::numeric_limits<float>::infinity()) == -1.0f);
}

TEST_CASE("erf_inv_f32: inverts erf in float32 and is ±inf at ±1") {
  for (float y = -0.999f; y <= 0.999f; y += 0.0137f) {
    const float x = kernels::erf_inv_f32(y);
    CHECK(std::erf(double(x)) == doctest::Approx(double(y)).epsilon(2e-6));
  }
  CHECK(kernels::erf_inv_f32(1.0f) == std::numeric_limits<float>::infinity());
  CHECK(kernels::erf_inv_f32(-1.0f) == -std::numeric_limits<float>::infinity());
  CHECK(kernels::erf_inv_f32(0.0f) == 0.0f);
}
