// flaxpp/io/byte_size.hpp — a number of bytes as configs and the command line write it (a memory
// budget): "48MiB", "1.5GiB", "64kB", "1000000".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flaxpp::io {

// A positive number (integer or decimal) optionally followed by a unit: B; kB, MB, GB, TB
// (powers of 1000); KiB, MiB, GiB, TiB (powers of 1024); a space between is allowed. Rounded
// down to whole bytes. Throws ParseError naming `what`, what came, and what is accepted.
std::int64_t parse_byte_size(std::string_view text, const std::string& what);

}  // namespace flaxpp::io
