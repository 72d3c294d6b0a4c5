#include "flaxpp/io/byte_size.hpp"

#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "flaxpp/core/error.hpp"

namespace flaxpp::io {

std::int64_t parse_byte_size(std::string_view text, const std::string& what) {
  const auto fail = [&]() -> std::int64_t {
    throw ParseError(detail::str(
        what,
        ": expected a positive number of bytes such as 48MiB, 1.5GiB, 64kB or 1000000 (units "
        "B, kB, MB, GB, TB, KiB, MiB, GiB, TiB), got \"",
        text, "\""));
  };
  const std::string s(text);
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) return fail();
  char* end = nullptr;
  errno = 0;
  const double number = std::strtod(s.c_str(), &end);
  if (errno != 0 || !std::isfinite(number) || number <= 0) return fail();
  std::string_view unit(end);
  if (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  static constexpr std::array<std::pair<std::string_view, double>, 10> kUnits = {{
      {"", 1.0},
      {"B", 1.0},
      {"kB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
      {"KiB", 1024.0},
      {"MiB", 1024.0 * 1024},
      {"GiB", 1024.0 * 1024 * 1024},
      {"TiB", 1024.0 * 1024 * 1024 * 1024},
  }};
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    const double bytes = std::floor(number * scale);
    if (bytes < 1 || bytes > 9.0e18) return fail();
    return static_cast<std::int64_t>(bytes);
  }
  return fail();
}

}  // namespace flaxpp::io
