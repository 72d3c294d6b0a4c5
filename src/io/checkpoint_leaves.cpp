// src/io/checkpoint_leaves.cpp — leaf dtypes and raw bytes for the checkpoint codecs.
#include "io/checkpoint_leaves.hpp"

#include <algorithm>
#include <bit>

#include "flaxpp/core/host_memory.hpp"

namespace flaxpp::io::checkpoint_leaves {

// Every format stores little-endian data and flaxpp copies host memory as is.
static_assert(std::endian::native == std::endian::little,
              "checkpoint I/O copies host memory as little-endian data; a big-endian host "
              "needs byte swapping in raw_bytes and array_from_raw");

bool is_supported(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::f64:
    case DType::i32:
    case DType::u32:
    case DType::bool_:
      return true;
    case DType::bf16:
    case DType::f16:
      break;
  }
  return false;
}

std::string_view supported_names() {
  return "float32, float64, int32, uint32, bool";
}

std::string describe_path(const std::string& path) {
  return path.empty() ? std::string("the root") : "'" + path + "'";
}

std::string join_path(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "/" + std::string(key);
}

void check_supported(const Tree& tree, std::string_view format_name) {
  for (const auto& [path, leaf] : tree.flatten()) {
    if (!leaf.valid())
      throw ValueError(detail::str("cannot save a ", format_name, " checkpoint: the leaf ",
                                   describe_path(path), " is a null Array; assign it first"));
    if (!is_supported(leaf.dtype()))
      throw ValueError(detail::str("cannot save a ", format_name, " checkpoint: the leaf ",
                                   describe_path(path), " has dtype ", dtype_name(leaf.dtype()),
                                   "; checkpoints hold ", supported_names(),
                                   " (convert it with astype(x, DType::f32) first)"));
  }
}

void check_tree_memory(std::size_t n, const std::string& source, std::string_view what) {
  constexpr double kBytesPerLeaf = 320;
  if (const auto shortfall = host_memory_shortfall(static_cast<double>(n) * kBytesPerLeaf))
    throw ParseError(detail::str(source, ": the tree of its ", n, " ", what, " ", *shortfall,
                                 " (about ", kBytesPerLeaf, " bytes each)"));
}

std::string_view raw_bytes(const Array& host) {
  FLAXPP_ASSERT(host.device() == Device::cpu(), "raw_bytes needs a host array");
  return {static_cast<const char*>(host.buffer().data()), static_cast<std::size_t>(host.nbytes())};
}

std::string check_raw(std::string_view bytes, const Shape& shape, DType dtype) {
  const std::size_t item = itemsize(dtype);
  // Compare by division: shape.size() * itemsize may not fit in 64 bits for a hostile shape.
  if (bytes.size() % item != 0 || bytes.size() / item != static_cast<std::uint64_t>(shape.size()))
    return detail::str("the data has ", bytes.size(), " bytes, but ", dtype_name(dtype), shape,
                       " needs ", shape.size(), " x ", item, " bytes");
  if (dtype == DType::bool_) {
    const auto bad =
        std::find_if(bytes.begin(), bytes.end(), [](char c) { return c != 0 && c != 1; });
    if (bad != bytes.end())
      return detail::str("bool element ", bad - bytes.begin(), " is the byte ",
                         +static_cast<std::uint8_t>(*bad), " (booleans are stored as 0 or 1)");
  }
  return {};
}

Array array_from_raw(std::string_view bytes, Shape shape, DType dtype) {
  return Array::from_host_bytes(bytes.data(), std::move(shape), dtype, Device::cpu());
}

}  // namespace flaxpp::io::checkpoint_leaves
