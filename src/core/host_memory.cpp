// Host memory available now (/proc/meminfo, sysconf, cgroup v2) and whole-file reads checked
// against it.
#include "flaxpp/core/host_memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>

#include "flaxpp/core/error.hpp"

namespace flaxpp {
namespace {

constexpr std::uint64_t kUnknown = std::numeric_limits<std::uint64_t>::max();

// The "MemAvailable:" line of /proc/meminfo, in bytes.
std::uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<std::uint64_t>(pages) * page;
  return kUnknown;
}

// A number from a one-line file, or kUnknown ("max", absent, unreadable).
std::uint64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  return in >> v ? v : kUnknown;
}

// What the process's cgroup v2 still allows: memory.max - memory.current of its group.
std::uint64_t cgroup_headroom() {
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    if (!line.starts_with("0::")) continue;  // the v2 hierarchy
    const std::string dir = "/sys/fs/cgroup" + line.substr(3);
    const std::uint64_t max = read_number(dir + "/memory.max");
    const std::uint64_t current = read_number(dir + "/memory.current");
    if (max == kUnknown || current == kUnknown) return kUnknown;
    return max > current ? max - current : 0;
  }
  return kUnknown;
}

// FLAXPP_HOST_MEMORY_LIMIT, a byte count, or kUnknown when unset or not a number.
std::uint64_t limit_from_environment() {
  const char* v = std::getenv("FLAXPP_HOST_MEMORY_LIMIT");
  if (v == nullptr) return kUnknown;
  std::uint64_t bytes = 0;
  const std::string_view s(v);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), bytes);
  return ec == std::errc() && end == s.data() + s.size() ? bytes : kUnknown;
}

}  // namespace

std::uint64_t available_host_memory() {
  return std::min({mem_available(), cgroup_headroom(), limit_from_environment()});
}

std::string format_bytes(double bytes) {
  if (bytes < 1000) return detail::str(static_cast<std::int64_t>(bytes), " bytes");
  static constexpr const char* kUnits[] = {"kB", "MB", "GB", "TB", "PB", "EB"};
  int unit = -1;
  while (bytes >= 1000 && unit < 5) {
    bytes /= 1000;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.*f %s", bytes < 10 ? 2 : (bytes < 100 ? 1 : 0), bytes,
                kUnits[unit]);
  return text;
}

std::optional<std::string> host_memory_shortfall(double bytes) {
  const std::uint64_t available = available_host_memory();
  if (available == kUnknown || !(bytes > static_cast<double>(available))) return std::nullopt;
  return detail::str("needs ", format_bytes(bytes), " of host memory, but ",
                     format_bytes(static_cast<double>(available)), " are available");
}

std::string read_whole_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ParseError(detail::str(path, ": is a directory; expected a file"));
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec) {
    if (const auto shortfall = host_memory_shortfall(static_cast<double>(size)))
      throw ParseError(detail::str(path, ": the file is ", format_bytes(static_cast<double>(size)),
                                   "; reading it ", *shortfall,
                                   ". Free memory or use a machine with more"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ParseError(detail::str(path, ": cannot open the file for reading (", std::strerror(errno),
                                 "); check the path"));
  // A regular file is read in one piece of its size; anything else (a pipe) as it comes.
  std::string bytes(ec ? 0 : static_cast<std::size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  if (!in.eof() && !in.bad()) {
    std::ostringstream rest;
    rest << in.rdbuf();
    bytes += std::move(rest).str();
  }
  if (in.bad()) throw ParseError(detail::str(path, ": reading the file failed"));
  return bytes;
}

}  // namespace flaxpp
