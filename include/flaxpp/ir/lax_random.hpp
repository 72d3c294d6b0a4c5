// flaxpp/ir/lax_random.hpp — jax.random's key operations as primitives (jax/_src/prng.py's
// random_bits, random_fold_in, random_split), over key data uint32[2], so that a key that is
// traced (an argument of a jitted step) draws inside the graph. random::Key's functions bind
// them for a traced key (random/traced_key_ops.hpp); concrete keys draw on the host. The words
// are kernels/threefry.hpp's RandomWords on every backend. No gradient (integer results).
// Under vmap a batch of keys gives each key's results stacked (one equation per key).
#pragma once

#include <cstdint>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/primitive.hpp"
#include "flaxpp/random/key.hpp"

namespace flaxpp::lax {

// random_bits(key): params "shape" and "partitionable" (bool, the key's mode): uint32[shape],
// jax.random.bits.
extern const ir::Primitive random_bits_p;
// random_fold_in(key): param "data" (in [0, 2^32)): the folded key's uint32[2].
extern const ir::Primitive random_fold_in_p;
// random_split(key): params "num" and "partitionable": uint32[num, 2], jax.random.split's keys.
extern const ir::Primitive random_split_p;

Array random_bits(const Array& key, const Shape& shape, random::ThreefryMode mode);
Array random_fold_in(const Array& key, std::uint32_t data);
Array random_split(const Array& key, std::int64_t num, random::ThreefryMode mode);

}  // namespace flaxpp::lax
