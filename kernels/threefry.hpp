// kernels/threefry.hpp — the Threefry-2x32 block (20 rounds, Random123 / JAX), and the two
// ways JAX turns it into per-element random words. Host and device; no framework headers.
// Reference: jax/_src/random/threefry2x32.py, prng.py (semantics doc §1.3-1.7).
#pragma once

#include <cstdint>

#include "flaxpp/kernels/hd.hpp"

namespace flaxpp::kernels {

struct U32Pair {
  std::uint32_t x0, x1;
};

FLAXPP_HD std::uint32_t rotl32(std::uint32_t v, unsigned r) {
  return (v << r) | (v >> (32u - r));
}

// One Threefry-2x32 block: key (k0, k1), counter (x0, x1) -> two words.
FLAXPP_HD U32Pair threefry2x32(std::uint32_t k0, std::uint32_t k1, std::uint32_t x0,
                               std::uint32_t x1) {
  const std::uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  const unsigned rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  x0 += ks[0];
  x1 += ks[1];
  for (unsigned g = 1; g <= 5; ++g) {
    const unsigned* r = rot[(g - 1) % 2];  // groups 1,3,5 use R0; 2,4 use R1
    for (unsigned i = 0; i < 4; ++i) {
      x0 += x1;
      x1 = rotl32(x1, r[i]);
      x1 ^= x0;
    }
    x0 += ks[g % 3];
    x1 += ks[(g + 1) % 3] + g;
  }
  return {x0, x1};
}

// Partitionable mode (JAX's default): element i (row-major flat index) comes from the block
// with counter (hi32(i), lo32(i)); a 32-bit draw is y0 ^ y1, a split/fold_in key is (y0, y1).
FLAXPP_HD U32Pair threefry_at_index(std::uint32_t k0, std::uint32_t k1, std::uint64_t i) {
  return threefry2x32(k0, k1, static_cast<std::uint32_t>(i >> 32), static_cast<std::uint32_t>(i));
}

FLAXPP_HD std::uint32_t partitionable_bits32(std::uint32_t k0, std::uint32_t k1, std::uint64_t i) {
  const U32Pair y = threefry_at_index(k0, k1, i);
  return y.x0 ^ y.x1;
}

// Legacy mode's threefry_2x32 over a counter array c[0..n): pad to even length with one 0,
// pair element j of the first half with element j of the second half (h = ceil(n/2)), and
// write the block's y0 to out[j] and y1 to out[h + j] (dropping the pad). For the iota
// counters used by legacy split/bits, c[j] = j; this returns out[idx] for out of length n.
FLAXPP_HD std::uint32_t legacy_iota_word(std::uint32_t k0, std::uint32_t k1, std::uint64_t n,
                                         std::uint64_t idx) {
  const std::uint64_t h = (n + 1) / 2;
  const std::uint64_t j = idx < h ? idx : idx - h;
  // The second-half counter of pair j is h + j, or the 0 pad when that is past the end.
  const std::uint64_t second = h + j < n ? h + j : 0;
  const U32Pair y =
      threefry2x32(k0, k1, static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(second));
  return idx < h ? y.x0 : y.x1;
}

// Word i of what a key operation gives, from the key (k0, k1): the one definition of
// jax.random's bits, fold_in and split, run by the host's Key functions and by the
// random_bits, random_fold_in and random_split primitives on every backend.
struct RandomWords {
  enum class Op : std::uint8_t { bits, fold_in, split };
  Op op;
  bool partitionable;
  // The result's words: bits' count (legacy mode pairs counters by it), 2 for fold_in, 2 * num
  // for split.
  std::uint64_t n;
  std::uint32_t data = 0;  // fold_in's

  // Key j of what fold_in (j = 0) or split gives: both its words, from one block where the
  // mode draws them from one (fold_in, and split in partitionable mode).
  FLAXPP_HD U32Pair key(std::uint32_t k0, std::uint32_t k1, std::uint64_t j) const {
    if (op == Op::fold_in) return threefry2x32(k0, k1, 0u, data);  // the same in both modes
    if (partitionable) return threefry_at_index(k0, k1, j);
    return {legacy_iota_word(k0, k1, n, 2 * j), legacy_iota_word(k0, k1, n, 2 * j + 1)};
  }

  FLAXPP_HD std::uint32_t operator()(std::uint32_t k0, std::uint32_t k1, std::uint64_t i) const {
    if (!partitionable && op != Op::fold_in) return legacy_iota_word(k0, k1, n, i);  // (num, 2)
    if (op == Op::bits) return partitionable_bits32(k0, k1, i);
    const U32Pair y = key(k0, k1, i / 2);
    return i % 2 == 0 ? y.x0 : y.x1;
  }
};

}  // namespace flaxpp::kernels
