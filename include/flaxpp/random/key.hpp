// flaxpp/random/key.hpp — JAX-compatible threefry2x32 PRNG keys: seeding, split, fold_in.
// Bit-for-bit as jax.random with x64 off (semantics doc §1.2-1.6). A key carries its mode:
// partitionable (JAX's default since 0.5.0) or legacy (jax_threefry_partitionable=False);
// keys derived from a key keep its mode.
//
// Inside a traced function (jit, grad) a key may be traced: its data an argument of the
// function or derived from one, as a jitted train step takes fold_in(key, step), so that the
// step draws new masks each time without tracing again. fold_in, split, bits, uniform and
// bernoulli of a traced key are primitives of the trace (random_fold_in, random_split,
// random_bits: the ir layer registers them, traced_key_ops.hpp), bit for bit the host's.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <ostream>
#include <vector>

#include "flaxpp/core/array.hpp"

namespace flaxpp::random {

enum class ThreefryMode : std::uint8_t { partitionable, legacy };

class Key {
 public:
  Key(std::uint32_t k0, std::uint32_t k1, ThreefryMode mode = ThreefryMode::partitionable)
      : words_{k0, k1}, mode_(mode) {}
  // From key data: a uint32[2] array, as jax.random.key_data returns it. Traced data (inside
  // jit or grad) gives a traced key.
  static Key from_data(const Array& data, ThreefryMode mode = ThreefryMode::partitionable);

  bool is_traced() const { return traced_ != nullptr; }
  // The key's two words; a TracerError for a traced key, whose words exist only when the
  // traced function runs.
  const std::array<std::uint32_t, 2>& words() const;
  ThreefryMode mode() const { return mode_; }
  // uint32[2], as jax.random.key_data (the traced array itself for a traced key).
  Array data() const;

  // Concrete keys are equal when their words and modes are; a traced key only to a copy of
  // itself.
  bool operator==(const Key& other) const;

 private:
  std::array<std::uint32_t, 2> words_{};
  ThreefryMode mode_;
  std::shared_ptr<Tracer> traced_;  // a traced key's uint32[2] data; null for a concrete key
};

std::ostream& operator<<(std::ostream& os, const Key& key);

// jax.random.key(seed) / PRNGKey(seed) with x64 off: the seed is taken modulo 2^32 (as JAX
// canonicalises it to int32), giving [0, seed mod 2^32] for any seed, negative ones included.
Key key(std::int64_t seed, ThreefryMode mode = ThreefryMode::partitionable);

// jax.random.fold_in: one threefry block with counter (0, data). Same in both modes. The
// functions here take traced keys too (a traced result).
Key fold_in(const Key& key, std::uint32_t data);

// jax.random.split(key, num).
std::vector<Key> split(const Key& key, std::int64_t num = 2);

// Stacks keys into uint32[n, 2] key data, as jax.random.split returns them.
Array key_data(const std::vector<Key>& keys);

}  // namespace flaxpp::random
