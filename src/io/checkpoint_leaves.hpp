// src/io/checkpoint_leaves.hpp — what the checkpoint codecs share about leaves: which dtypes a
// checkpoint holds, an array's raw little-endian bytes, and arrays rebuilt from such bytes.
#pragma once

#include <string>
#include <string_view>

#include "flaxpp/core/tree.hpp"

namespace flaxpp::io::checkpoint_leaves {

// float32, float64, int32, uint32 and bool: the dtypes every checkpoint format round-trips.
bool is_supported(DType dtype);
// "float32, float64, int32, uint32, bool", for error messages.
std::string_view supported_names();
// Throws ValueError naming the first leaf whose dtype is not supported and how to fix it.
void check_supported(const Tree& tree, std::string_view format_name);

// "'params/Dense_0/kernel'", or "the root" for the empty path.
std::string describe_path(const std::string& path);
std::string join_path(const std::string& prefix, std::string_view key);

// A ParseError "<source>: the tree of its N <what> needs ... of host memory, but ..." when a
// tree of `n` leaves would not fit: each is an Array of its own and a dict entry, about 320
// bytes (measured) however few bytes its encoding takes.
void check_tree_memory(std::size_t n, const std::string& source, std::string_view what);

// The array's elements as row-major little-endian bytes: a view into `host`, which must be a
// CPU array (see Array::to) that outlives the view.
std::string_view raw_bytes(const Array& host);
// An array of `shape` and `dtype` from row-major little-endian bytes. Returns an empty string
// on success, else the problem (a wrong byte count, a bool byte other than 0 or 1).
std::string check_raw(std::string_view bytes, const Shape& shape, DType dtype);
// check_raw must have passed.
Array array_from_raw(std::string_view bytes, Shape shape, DType dtype);

}  // namespace flaxpp::io::checkpoint_leaves
