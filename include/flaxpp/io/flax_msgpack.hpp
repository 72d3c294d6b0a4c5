// flaxpp/io/flax_msgpack.hpp — Flax's msgpack checkpoint encoding, byte-compatible with
// flax.serialization.to_bytes (writing) and msgpack_restore (reading), for Trees of arrays.
//
// Layout (flax/serialization.py, Flax 0.12):
//   * the state dict is a msgpack map; dict keys are strings (Flax turns list and tuple
//     entries into the keys "0", "1", ...);
//   * an array is ExtType(1, packb((shape, dtype_name, row_major_bytes))): the payload is a
//     msgpack array of [shape as an array of ints, numpy dtype name as a str ("float32"),
//     the little-endian data as a bin];
//   * an array of more than 2^30 bytes (flax.serialization.MAX_CHUNK_SIZE) is replaced by the
//     map {"__msgpack_chunked_array__": true, "shape": {"0": d0, ...},
//     "chunks": {"0": ext1(flat[0:k]), "1": ext1(flat[k:2k]), ...}} with
//     k = max(1, 2^30 / itemsize) elements per 1-d chunk.
// Reading also accepts what msgpack_restore accepts and a Tree can hold: ExtType(3) (numpy
// scalars, as 0-d arrays), a map with "__msgpack_chunked_array__" anywhere (unchunked),
// msgpack arrays (as dicts keyed "0", "1", ...), integer map keys (as decimal strings), and
// native scalars as 0-d arrays (bool -> bool, float32 -> float32, float64 -> float64, an
// integer -> int32, or uint32 when it only fits there). nil, strings, complex numbers and
// dtypes other than float32, float64, int32, uint32 and bool are ParseErrors naming the path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "flaxpp/core/tree.hpp"

namespace flaxpp::io {

// flax.serialization.MAX_CHUNK_SIZE: arrays above this many bytes are written in chunks.
inline constexpr std::int64_t kFlaxMaxChunkBytes = std::int64_t{1} << 30;

// The bytes flax.serialization.to_bytes writes for this state dict (dict keys in sorted order).
// `max_chunk_bytes` is Flax's MAX_CHUNK_SIZE; only tests and tools change it.
std::string to_flax_msgpack(const Tree& tree, std::int64_t max_chunk_bytes = kFlaxMaxChunkBytes);
// Decodes flax.serialization.to_bytes output; errors start with `source` and name the byte
// offset and the tree path.
Tree from_flax_msgpack(std::string_view bytes, const std::string& source = "<msgpack bytes>");

}  // namespace flaxpp::io
