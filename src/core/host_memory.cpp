// Host memory available now (/proc/meminfo, sysconf, cgroup v2) and whole-file reads checked
// against it.
#include "flaxpp/core/host_memory.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
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

// The "MemAvailable:   123456 kB" line of /proc/meminfo, in bytes.
std::uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    std::uint64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
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

// The least limit - usage of the cgroup `group` under `root` and of the groups above it (a
// container's limit is often set on a parent), or kUnknown.
std::uint64_t headroom_of(const std::string& root, const std::string& group, const char* limit,
                          const char* usage) {
  std::uint64_t headroom = kUnknown;
  for (std::filesystem::path dir = root + group; dir.string().size() > root.size();
       dir = dir.parent_path()) {
    const std::uint64_t max = read_number((dir / limit).string());
    const std::uint64_t current = read_number((dir / usage).string());
    if (max != kUnknown && current != kUnknown)
      headroom = std::min(headroom, max > current ? max - current : 0);
  }
  return headroom;
}

// What the process's memory cgroup still allows: cgroup v2 ("0::/group") or the v1 memory
// controller ("N:memory:/group").
std::uint64_t cgroup_headroom() {
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  std::uint64_t headroom = kUnknown;
  while (std::getline(self, line)) {
    if (line.starts_with("0::"))
      headroom = std::min(
          headroom, headroom_of("/sys/fs/cgroup", line.substr(3), "memory.max", "memory.current"));
    if (const std::size_t at = line.find(":memory:"); at != std::string::npos)
      headroom = std::min(headroom, headroom_of("/sys/fs/cgroup/memory", line.substr(at + 8),
                                                "memory.limit_in_bytes", "memory.usage_in_bytes"));
  }
  return headroom;
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

std::uint64_t peak_host_memory() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // Linux counts kilobytes
}

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
