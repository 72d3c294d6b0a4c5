// flaxpp/io/safetensors.hpp — Trees as safetensors files (huggingface.co/docs/safetensors):
// an 8-byte little-endian header length N, N bytes of JSON header, then the tensors' raw
// little-endian bytes, contiguous and in header order.
//
// The header maps each tensor name to {"dtype": "F32"|"F64"|"I32"|"U32"|"BOOL", "shape": [...],
// "data_offsets": [begin, end]} (offsets relative to the data section). Tensor names are the
// leaves' '/'-joined tree paths ("params/Dense_0/kernel"); loading splits names at '/' to
// rebuild the tree, so names from other tools ("model.layers.0.weight") become top-level keys.
// "__metadata__" holds {"format": "flaxpp.checkpoint/1"} and, when the tree has empty dicts
// (optax's EmptyState), "flaxpp.empty_dicts": a JSON list of their paths, so they survive.
// The header is padded with spaces to a multiple of 8 bytes, as the reference writer does.
#pragma once

#include <string>
#include <string_view>

#include "flaxpp/core/tree.hpp"

namespace flaxpp::io {

// Throws ValueError when the tree cannot be named by paths: a root that is a single array,
// or a key that is empty or contains '/'.
std::string to_safetensors(const Tree& tree);
// Validates the header (names, dtypes, shapes, and offsets that tile the data section
// exactly) and throws ParseError starting with `source` on any mismatch.
Tree from_safetensors(std::string_view bytes, const std::string& source = "<safetensors bytes>");

}  // namespace flaxpp::io
