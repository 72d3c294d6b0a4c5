// tanh_f32 and exp_f32 (cpu_math_loops.hpp): plain loops the compiler vectorises, cloned per
// instruction set.
#include "backend/cpu/cpu_math_loops.hpp"

#include <bit>
#include <cmath>

#include "backend/cpu/cpu_clones.hpp"
#include "backend/cpu/cpu_integer_pow.hpp"
#include "flaxpp/kernels/special_math.hpp"

namespace flaxpp::cpu {
namespace {

// exp(x) = 2^(k/32) * 2^(t/32) with z = x * 32/ln2 = k + t, k an integer, |t| <= 1/2.
constexpr int kTableBits = 5;
constexpr int kTableSize = 1 << kTableBits;
// 32/ln2 = kScaleHi + kScaleLo: the high part has 24 bits, so that x * kScaleHi is exact in
// double for a float32 x, and t carries no error of the scale's rounding.
constexpr double kScaleHi = 0x1.715476p+5, kScaleLo = 0x1.4ae0bf85ddf44p-21;
// Adding 1.5 * 2^52 rounds a double of magnitude below 2^51 to an integer, which is then the
// low bits of the sum's representation.
constexpr double kShift = 0x1.8p52;
// 2^(t/32) - 1 = sum of (t ln2/32)^j / j! for j = 1..6: |t ln2/32| <= 0.0109, so the seventh
// term (4e-18 relative) is far below double's rounding.
constexpr double kStep = 0.6931471805599453094 / kTableSize;
constexpr double kC1 = kStep, kC2 = kC1 * kStep / 2, kC3 = kC2 * kStep / 3, kC4 = kC3 * kStep / 4,
                 kC5 = kC4 * kStep / 5, kC6 = kC5 * kStep / 6;
// Inputs are clamped here first: exp(-104) is below half the least subnormal (2^-150), so it
// rounds to 0, and exp(89) is above FLT_MAX, so it rounds to inf; k then stays in range.
constexpr float kLowest = -104.0f, kHighest = 89.0f;

// 2^(i/32) for i < 32.
struct PowersOfTwo {
  double value[kTableSize];
  PowersOfTwo() {
    for (int i = 0; i < kTableSize; ++i)
      value[i] = std::exp2(static_cast<double>(i) / kTableSize);
  }
};

const double* powers_of_two() {
  static const PowersOfTwo table;
  return table.value;
}

}  // namespace

FLAXPP_CPU_CLONES void tanh_f32(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = kernels::xla_tanh_f32(x[i]);
}

FLAXPP_CPU_CLONES void exp_f32(const float* x, float* y, std::int64_t n) {
  const double* table = powers_of_two();
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float clamped = v < kLowest ? kLowest : (v > kHighest ? kHighest : v);  // NaN stays
    const double high = static_cast<double>(clamped) * kScaleHi;                  // exact
    const double low = static_cast<double>(clamped) * kScaleLo;
    const double shifted = (high + low) + kShift;
    const double t = (high - (shifted - kShift)) + low;    // the subtraction is exact
    const auto k = std::bit_cast<std::uint64_t>(shifted);  // k in its low bits
    // 2^(k/32): the table's 2^((k mod 32)/32) with k div 32 added to its exponent (modulo
    // 2^64, which subtracts for a negative k).
    const double scale = std::bit_cast<double>(
        std::bit_cast<std::uint64_t>(table[k & (kTableSize - 1)]) + ((k >> kTableBits) << 52));
    const double p = t * (kC1 + t * (kC2 + t * (kC3 + t * (kC4 + t * (kC5 + t * kC6)))));
    const float result = static_cast<float>(scale + scale * p);
    y[i] = v != v ? v + v : result;
  }
}

FLAXPP_CPU_CLONES void integer_pow_f32(std::int64_t power, const float* x, float* y,
                                       std::int64_t n) {
  integer_pow_rows(power, x, y, n);
}

}  // namespace flaxpp::cpu
