// DType sizes and names.
#include "flaxpp/core/dtype.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "flaxpp/core/error.hpp"

namespace flaxpp {
namespace {

struct DTypeInfo {
  DType dtype;
  std::size_t itemsize;
  std::string_view name;
  std::string_view short_name;
  bool floating;
  bool integer;
};

constexpr std::array<DTypeInfo, 7> kInfo{{
    {DType::f32, 4, "float32", "f32", true, false},
    {DType::f64, 8, "float64", "f64", true, false},
    {DType::bf16, 2, "bfloat16", "bf16", true, false},
    {DType::f16, 2, "float16", "f16", true, false},
    {DType::i32, 4, "int32", "i32", false, true},
    {DType::u32, 4, "uint32", "u32", false, true},
    {DType::bool_, 1, "bool", "bool", false, false},
}};

const DTypeInfo& info(DType dtype) {
  const auto& entry = kInfo[static_cast<std::size_t>(dtype)];
  FLAXPP_ASSERT(entry.dtype == dtype, "dtype table out of order");
  return entry;
}

}  // namespace

std::size_t itemsize(DType dtype) {
  return info(dtype).itemsize;
}
std::string_view dtype_name(DType dtype) {
  return info(dtype).name;
}
std::string_view dtype_short_name(DType dtype) {
  return info(dtype).short_name;
}
bool is_floating(DType dtype) {
  return info(dtype).floating;
}
bool is_half(DType dtype) {
  return dtype == DType::bf16 || dtype == DType::f16;
}
bool is_integer(DType dtype) {
  return info(dtype).integer;
}

DType dtype_from_name(std::string_view name) {
  for (const auto& entry : kInfo)
    if (entry.name == name) return entry.dtype;
  std::string accepted;
  for (const auto& entry : kInfo)
    accepted += detail::str(accepted.empty() ? "" : ", ", entry.name);
  throw ValueError(detail::str("unknown dtype \"", name, "\"; expected one of ", accepted));
}

float round_to_float32(double d) {
  constexpr double kMax = std::numeric_limits<float>::max();
  if (std::isnan(d) || std::abs(d) <= kMax) return static_cast<float>(d);
  // Halfway between FLT_MAX and 2^128 rounds to even, which is infinity.
  constexpr double kHalfUlpAboveMax = 0x1p103;
  const float magnitude = std::abs(d) < kMax + kHalfUlpAboveMax
                              ? std::numeric_limits<float>::max()
                              : std::numeric_limits<float>::infinity();
  return d < 0 ? -magnitude : magnitude;
}

std::uint16_t round_to_bfloat16_bits(double value) {
  const float f = round_to_float32(value);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  if (std::isnan(f)) return static_cast<std::uint16_t>((bits >> 16) | 0x0040);  // quiet NaN
  // Round the low 16 bits to nearest, ties to the even upper half (carries into the exponent
  // round up to the next binade or to infinity, as they should).
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>(bits >> 16);
}

std::uint16_t round_to_float16_bits(double value) {
  const std::uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isnan(value)) return sign | 0x7E00;
  const double a = std::abs(value);
  // 65520 is halfway between the largest float16 (65504) and 2^16; the tie goes to even: inf.
  if (a >= 65520.0) return sign | 0x7C00;
  // nearbyint rounds to nearest-even in the default rounding mode; scaling by powers of two
  // is exact.
  if (a < 0x1p-14) return sign | static_cast<std::uint16_t>(std::nearbyint(a * 0x1p24));
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): a in [2^(e-1), 2^e)
  int exponent = e - 1;
  double mantissa = std::nearbyint(std::ldexp(a, 10 - exponent));  // in [1024, 2048]
  if (mantissa == 2048.0) {
    mantissa = 1024.0;
    ++exponent;
  }
  return sign |
         static_cast<std::uint16_t>(((exponent + 15) << 10) | (static_cast<int>(mantissa) - 1024));
}

double bfloat16_bits_to_double(std::uint16_t bits) {
  // bfloat16 is float32's upper half.
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float f = 0.0f;
  std::memcpy(&f, &wide, sizeof f);
  return f;
}

double float16_bits_to_double(std::uint16_t bits) {
  const double sign = (bits & 0x8000) != 0 ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  if (exponent == 0x1F)
    return mantissa != 0 ? std::numeric_limits<double>::quiet_NaN()
                         : sign * std::numeric_limits<double>::infinity();
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);  // zero and subnormals
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

namespace detail {
void throw_no_host_type(DType dtype, const char* what) {
  throw ValueError(str(what, ": dtype ", dtype_name(dtype),
                       " has no host element type yet; convert to float32 first"));
}
}  // namespace detail

}  // namespace flaxpp
