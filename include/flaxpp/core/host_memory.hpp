// flaxpp/core/host_memory.hpp — how much host memory is available now, so that readers refuse
// an input whose sizes would need more than the machine has (rather than fixed caps that would
// reject a valid file), and the whole-file read they share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace flaxpp {

// Bytes of host memory a process could allocate now without swapping: Linux's MemAvailable
// (else free pages times the page size), less where the process's cgroup (a container's memory
// limit) leaves less, or where the environment variable FLAXPP_HOST_MEMORY_LIMIT (a byte count)
// says less. Read anew at every call: it changes.
std::uint64_t available_host_memory();

// The most host memory this process has held resident so far, in bytes (getrusage's
// ru_maxrss): what a run needed at its peak, as /usr/bin/time -v reports it.
std::uint64_t peak_host_memory();

// When `bytes` (a double, so that products of hostile sizes cannot overflow) exceed
// available_host_memory(): a phrase for an error message, "needs 8.00 GB of host memory, but
// 3.10 GB are available"; else nothing.
std::optional<std::string> host_memory_shortfall(double bytes);

// "8.00 GB", "512 bytes": a byte count for people.
std::string format_bytes(double bytes);

// The whole file as bytes. A file that cannot be opened or read, or that is larger than the
// host memory available, is a ParseError naming it and the reason.
std::string read_whole_file(const std::string& path);

}  // namespace flaxpp
