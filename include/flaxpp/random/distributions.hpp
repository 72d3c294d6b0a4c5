// flaxpp/random/distributions.hpp — jax.random's samplers. bits and uniform are bit-exact
// with JAX; normal and truncated_normal go through erf_inv/log1p and match JAX's CPU results
// to within a few float32 ulps (semantics doc §1.11-1.12). Results are host (CPU) arrays.
#pragma once

#include <cstdint>

#include "flaxpp/core/array.hpp"
#include "flaxpp/random/key.hpp"

namespace flaxpp::random {

// jax.random.bits(key, shape): uint32 words.
Array bits(const Key& key, const Shape& shape);

// A ValueError when `mode` cannot draw that many words (legacy mode: 2^32 - 1 or more), for the
// host's draws and the random_bits primitive alike.
void check_bits_count(const Shape& shape, ThreefryMode mode);

// jax.random.uniform(key, shape, dtype, minval, maxval): values in [minval, maxval).
// minval and maxval are first rounded to dtype, as JAX converts them.
Array uniform(const Key& key, const Shape& shape, DType dtype = DType::f32, double minval = 0.0,
              double maxval = 1.0);

// jax.random.randint(key, shape, minval, maxval, dtype) with x64 off: integers in
// [minval, maxval), bit for bit as JAX draws them (two words of bits per value, from the two
// keys of split(key), reduced modulo the span; slightly biased unless the span is a power of
// two, as JAX's own note says). dtype int32 (default) or uint32. minval and maxval are Python
// ints to JAX: each must fit int32 (JAX raises OverflowError otherwise; here ValueError), and
// both are then clipped to dtype's range (a negative bound is 0 for uint32). maxval <= minval
// gives minval everywhere.
Array randint(const Key& key, const Shape& shape, std::int64_t minval, std::int64_t maxval,
              DType dtype = DType::i32);

// jax.random.bernoulli(key, p, shape): bool draws, true where uniform(key, shape) < f32(p) (the
// draws of Flax's Dropout and of attention dropout).
Array bernoulli(const Key& key, double p, const Shape& shape);

// jax.random.normal(key, shape, dtype): standard normal draws.
Array normal(const Key& key, const Shape& shape, DType dtype = DType::f32);

// jax.random.truncated_normal(key, lower, upper, shape, dtype): standard normal draws
// truncated to the open interval (lower, upper).
Array truncated_normal(const Key& key, double lower, double upper, const Shape& shape,
                       DType dtype = DType::f32);

}  // namespace flaxpp::random
