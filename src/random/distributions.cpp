// jax.random samplers on the host: bits, uniform, normal, truncated_normal (float32).
#include "flaxpp/random/distributions.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

#include "flaxpp/kernels/special_math.hpp"
#include "flaxpp/random/traced_key_ops.hpp"
#include "kernels/threefry.hpp"

namespace flaxpp::random {
namespace {

constexpr float kSqrt2 = 1.41421354f;  // np.array(np.sqrt(2), float32) = 0x3FB504F3

void check_float32(DType dtype, const char* what) {
  if (dtype != DType::f32)
    throw ValueError(detail::str("random.", what, ": dtype ", dtype_name(dtype),
                                 " is not supported; float32 is (JAX itself "
                                 "needs jax_enable_x64 for float64). Draw float32 and convert"));
}

std::vector<std::uint32_t> bits32(const Key& key, const Shape& shape) {
  const auto n = static_cast<std::uint64_t>(shape.size());
  const bool partitionable = key.mode() == ThreefryMode::partitionable;
  check_bits_count(shape, key.mode());
  const kernels::RandomWords words{
      .op = kernels::RandomWords::Op::bits, .partitionable = partitionable, .n = n};
  const auto [k0, k1] = key.words();
  std::vector<std::uint32_t> out(n);
  for (std::uint64_t i = 0; i < n; ++i)
    out[i] = words(k0, k1, i);
  return out;
}

// jax.random._uniform for float32: 23 random mantissa bits under exponent 0 give f in
// [0, 1) exactly; then max(minval, f * (maxval - minval) + minval), where XLA's CPU
// backend contracts the multiply-add into one FMA.
std::vector<float> uniform_f32(const Key& key, const Shape& shape, float minval, float maxval) {
  const std::vector<std::uint32_t> b = bits32(key, shape);
  const float range = maxval - minval;
  std::vector<float> out(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) {
    const float f = std::bit_cast<float>((b[i] >> 9) | 0x3F800000u) - 1.0f;
    // lax.max propagates NaN (e.g. an infinite range times 0); std::max would drop it.
    const float v = std::fmaf(f, range, minval);
    out[i] = std::isnan(v) ? v : std::max(minval, v);
  }
  return out;
}

}  // namespace

void check_bits_count(const Shape& shape, ThreefryMode mode) {
  // Legacy: threefry_2x32(key, iota(n)) — one call over all n words, so each value depends
  // on the total size. JAX splits the key for n >= 2^32 - 1; arrays that large are refused.
  if (mode == ThreefryMode::legacy && static_cast<std::uint64_t>(shape.size()) >= 0xFFFFFFFFull)
    throw ValueError(
        detail::str("random.bits: legacy threefry mode supports fewer than 2^32-1 "
                    "elements, got ",
                    shape.size(), "; use the partitionable mode"));
}

Array bits(const Key& key, const Shape& shape) {
  if (key.is_traced()) return traced_key_ops().bits(key.data(), shape, key.mode());
  return Array::from_vector(bits32(key, shape), shape);
}

Array uniform(const Key& key, const Shape& shape, DType dtype, double minval, double maxval) {
  check_float32(dtype, "uniform");
  if (key.is_traced())
    return traced_key_ops().uniform(key.data(), shape, key.mode(), round_to_float32(minval),
                                    round_to_float32(maxval));
  return Array::from_vector(
      uniform_f32(key, shape, round_to_float32(minval), round_to_float32(maxval)), shape);
}

Array randint(const Key& key, const Shape& shape, std::int64_t minval, std::int64_t maxval,
              DType dtype) {
  if (dtype != DType::i32 && dtype != DType::u32)
    throw ValueError(detail::str("random.randint: dtype ", dtype_name(dtype),
                                 " is not supported; int32 and uint32 are (JAX needs "
                                 "jax_enable_x64 for 64-bit integers)"));
  for (const auto& [name, v] : {std::pair{"minval", minval}, std::pair{"maxval", maxval}})
    if (!std::in_range<std::int32_t>(v))
      throw ValueError(detail::str("random.randint: ", name, " ", v,
                                   " does not fit int32, as JAX (x64 off) needs; pass a bound in [",
                                   std::numeric_limits<std::int32_t>::min(), ", ",
                                   std::numeric_limits<std::int32_t>::max(), "]"));
  // jax._src.random._randint with nbits = 32. The bounds are clipped to dtype's range (int32
  // bounds need no clipping; uint32 ones lose their negative part) and from here on all
  // arithmetic is uint32 and wraps, as XLA's does: maxval - minval (int32 subtraction, then
  // reinterpreted) and minval + offset give the same bits in either dtype.
  const bool is_unsigned = dtype == DType::u32;
  const std::int64_t lo = is_unsigned ? std::max<std::int64_t>(minval, 0) : minval;
  const std::int64_t hi = is_unsigned ? std::max<std::int64_t>(maxval, 0) : maxval;
  const std::vector<Key> keys = split(key, 2);
  const std::vector<std::uint32_t> higher_bits = bits32(keys[0], shape);
  const std::vector<std::uint32_t> lower_bits = bits32(keys[1], shape);
  const auto lo_bits = static_cast<std::uint32_t>(lo);
  // maxval <= minval: span 1, so that minval is always returned.
  const std::uint32_t span = hi <= lo ? 1u : static_cast<std::uint32_t>(hi) - lo_bits;
  // (2^32 mod span) as JAX computes it: (2^16 mod span)^2 mod span, the square wrapping at 2^32
  // (so for span > 2^16 the multiplier is 0 and only the lower bits count).
  std::uint32_t multiplier = 65536u % span;
  multiplier = (multiplier * multiplier) % span;
  std::vector<std::uint32_t> out(higher_bits.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint32_t offset =
        ((higher_bits[i] % span) * multiplier + lower_bits[i] % span) % span;
    out[i] = lo_bits + offset;
  }
  if (is_unsigned) return Array::from_vector(out, shape);
  std::vector<std::int32_t> signed_out(out.size());
  std::transform(out.begin(), out.end(), signed_out.begin(),
                 [](std::uint32_t v) { return static_cast<std::int32_t>(v); });
  return Array::from_vector(signed_out, shape);
}

Array bernoulli(const Key& key, double p, const Shape& shape) {
  const float threshold = round_to_float32(p);
  if (key.is_traced()) return traced_key_ops().bernoulli(key.data(), shape, key.mode(), threshold);
  const std::vector<float> u = uniform_f32(key, shape, 0.0f, 1.0f);
  std::vector<bool> out(u.size());
  for (std::size_t i = 0; i < u.size(); ++i)
    out[i] = u[i] < threshold;
  return Array::from_vector(out, shape);
}

Array normal(const Key& key, const Shape& shape, DType dtype) {
  check_float32(dtype, "normal");
  // u in [nextafter(-1, 0), 1), so erf_inv stays finite.
  std::vector<float> v = uniform_f32(key, shape, std::nextafterf(-1.0f, 0.0f), 1.0f);
  for (float& x : v)
    x = kSqrt2 * kernels::erf_inv_f32(x);
  return Array::from_vector(v, shape);
}

Array truncated_normal(const Key& key, double lower, double upper, const Shape& shape,
                       DType dtype) {
  check_float32(dtype, "truncated_normal");
  const float lo = round_to_float32(lower);
  const float hi = round_to_float32(upper);
  // Inverse-CDF sampling: u uniform between the CDF values of the bounds (in erf space).
  // XLA folds the division by the constant sqrt(2) into a multiplication by f32(1/sqrt(2)).
  constexpr float kInvSqrt2 = 1.0f / kSqrt2;  // 0x3F3504F3
  const float a = kernels::xla_erf_f32(lo * kInvSqrt2);
  const float b = kernels::xla_erf_f32(hi * kInvSqrt2);
  std::vector<float> v = uniform_f32(key, shape, a, b);
  // Rounding can land exactly on a bound; clip into the open interval as JAX does.
  const float clip_lo = std::nextafterf(lo, std::numeric_limits<float>::infinity());
  const float clip_hi = std::nextafterf(hi, -std::numeric_limits<float>::infinity());
  for (float& x : v)
    x = std::min(std::max(kSqrt2 * kernels::erf_inv_f32(x), clip_lo), clip_hi);
  return Array::from_vector(v, shape);
}

}  // namespace flaxpp::random
