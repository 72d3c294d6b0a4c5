// tools/checkpoint_convert.cpp — flaxpp_checkpoint_convert IN OUT: converts a checkpoint between
// flaxpp JSON, safetensors and Flax msgpack, each file's format chosen by its extension.
#include <charconv>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "flaxpp/io/checkpoint.hpp"
#include "flaxpp/io/flax_msgpack.hpp"

namespace {

constexpr const char* kUsage =
    "usage: flaxpp_checkpoint_convert [--max-chunk-bytes N] IN OUT\n"
    "  Converts a checkpoint; IN and OUT end in .json (flaxpp JSON), .safetensors or .msgpack\n"
    "  (Flax's flax.serialization.to_bytes). OUT is replaced atomically.\n"
    "  --max-chunk-bytes N  write msgpack arrays above N bytes in Flax's chunked layout\n"
    "                       (default 2^30, flax.serialization.MAX_CHUNK_SIZE)\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  std::int64_t max_chunk_bytes = flaxpp::io::kFlaxMaxChunkBytes;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--max-chunk-bytes" && i + 1 < argc) {
      const std::string_view value = argv[++i];
      const auto [end, ec] =
          std::from_chars(value.data(), value.data() + value.size(), max_chunk_bytes);
      if (ec != std::errc() || end != value.data() + value.size() || max_chunk_bytes < 1) {
        std::cerr << "flaxpp_checkpoint_convert: --max-chunk-bytes takes a positive integer, got \""
                  << value << "\"\n";
        return 2;
      }
      continue;
    }
    paths.emplace_back(arg);
  }
  if (paths.size() != 2) {
    std::cerr << kUsage;
    return 2;
  }
  try {
    const flaxpp::Tree tree = flaxpp::io::load_checkpoint(paths[0]);
    const flaxpp::io::CheckpointFormat out_format = flaxpp::io::format_from_path(paths[1]);
    if (out_format == flaxpp::io::CheckpointFormat::msgpack) {
      flaxpp::io::write_file_atomically(paths[1],
                                        flaxpp::io::to_flax_msgpack(tree, max_chunk_bytes));
    } else {
      flaxpp::io::save_checkpoint(paths[1], tree, out_format);
    }
    std::cout << paths[0] << " -> " << paths[1] << " (" << tree.flatten().size() << " arrays)\n";
  } catch (const flaxpp::Error& e) {
    std::cerr << "flaxpp_checkpoint_convert: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
