// The CPU's float32 exp (src/backend/cpu/cpu_math_loops.hpp), through lax::exp unfused and in
// a fused program: the float32 rounding of exp computed in double, bit for bit, over every
// float32 from -104 to 89 in a stride of 997 representations and the edges (zeros, infinities,
// NaN, the overflow and underflow thresholds, subnormal results). The arrays live on the CPU
// whatever the suite's default device.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/elementwise_program.hpp"
#include "flaxpp/ir/lax.hpp"

using namespace flaxpp;

namespace {

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

std::vector<float> inputs() {
  std::vector<float> x;
  // Every 997th float32 of each sign up to |x| = 104 (beyond it the results are 0 or inf).
  for (std::uint32_t b = 0; b < bits(104.0f); b += 997) {
    x.push_back(from_bits(b));
    x.push_back(from_bits(b | 0x80000000u));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (const float v : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 88.72283f,
                        0x1.62e42ep6f, 0x1.62e430p6f, 89.0f, 1e30f, -87.33654f, -103.27893f,
                        -0x1.9fe368p6f, -0x1.9fe36ap6f, -104.0f, -1e30f, 1e-30f, -1e-45f})
    x.push_back(v);
  return x;
}

// The float32 rounding of exp in double (NaN for NaN).
std::uint32_t expected(float x) {
  return bits(static_cast<float>(std::exp(static_cast<double>(x))));
}

}  // namespace

TEST_CASE("cpu exp: float32 exp is exp in double rounded once, unfused and fused") {
  const std::vector<float> x = inputs();
  const Array xa = Array::from_vector(x, Shape{static_cast<std::int64_t>(x.size())}, Device::cpu());
  ir::ElementwiseBuilder b;
  const ir::EValue in = b.input();
  b.output(ir::exp(in));
  const Array operand[] = {xa};
  const std::vector<float> unfused = lax::exp(xa).to_vector<float>();
  const std::vector<float> fused =
      lax::fused_elementwise(b.finish(), {}, operand).at(0).to_vector<float>();
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      CHECK(std::isnan(unfused[i]));
      CHECK(std::isnan(fused[i]));
      continue;
    }
    if (bits(unfused[i]) != expected(x[i]) || bits(fused[i]) != bits(unfused[i])) {
      if (++mismatches <= 5) {
        CAPTURE(x[i]);
        CHECK(bits(unfused[i]) == expected(x[i]));
        CHECK(bits(fused[i]) == bits(unfused[i]));
      }
    }
  }
  CHECK(mismatches == 0);
}
