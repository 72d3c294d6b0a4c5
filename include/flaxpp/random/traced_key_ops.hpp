// flaxpp/random/traced_key_ops.hpp — what the random functions do with a traced key. A traced
// key's words exist only when the traced function runs, so its fold_in, split and draws are
// primitives of the trace; the random layer lies below the ir layer that defines them, so the
// ir layer registers these as the program starts (ir/primitives/random.cpp) and the random
// functions call them for a traced key. `key` is the key's traced uint32[2] data.
#pragma once

#include <cstdint>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/random/key.hpp"

namespace flaxpp::random {

struct TracedKeyOps {
  Array (*fold_in)(const Array& key, std::uint32_t data);
  // The num keys' data, each uint32[2].
  std::vector<Array> (*split)(const Array& key, std::int64_t num, ThreefryMode mode);
  Array (*bits)(const Array& key, const Shape& shape, ThreefryMode mode);
  // float32 in [minval, maxval), as uniform's: for [0, 1) bit for bit JAX's; for other bounds
  // the scaling's multiply and add are rounded one at a time, where XLA's CPU backend
  // contracts them into one FMA (a last-bit difference at most).
  Array (*uniform)(const Array& key, const Shape& shape, ThreefryMode mode, float minval,
                   float maxval);
  // bool, uniform(key, shape) < threshold.
  Array (*bernoulli)(const Array& key, const Shape& shape, ThreefryMode mode, float threshold);
};

void register_traced_key_ops(const TracedKeyOps& ops);
// The registered operations; a ValueError when none are (a program that never links the ir
// layer's primitives cannot trace).
const TracedKeyOps& traced_key_ops();

}  // namespace flaxpp::random
