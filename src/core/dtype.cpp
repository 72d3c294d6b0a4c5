// DType sizes and names.
#include "flaxpp/core/dtype.hpp"

#include <array>
#include <cmath>
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

namespace detail {
void throw_no_host_type(DType dtype, const char* what) {
  throw ValueError(str(what, ": dtype ", dtype_name(dtype),
                       " has no host element type yet; convert to float32 first"));
}
}  // namespace detail

}  // namespace flaxpp
