// SHA-256 (FIPS 180-4) of bytes and of files, as lowercase hex: the content hash `flaxpp train`
// records of its data, so that a resumed run can tell that a file changed in place.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace flaxpp::cli {

std::string sha256_hex(std::string_view bytes);

// 32-bit words as big-endian lowercase hex (8 digits each), as a digest is written.
std::string hex_words(std::span<const std::uint32_t> words);

// The file's hash, read in blocks. Throws ParseError naming the file when it cannot be read.
std::string file_sha256_hex(const std::string& path);

}  // namespace flaxpp::cli
