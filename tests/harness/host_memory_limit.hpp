// Sets FLAXPP_HOST_MEMORY_LIMIT for the lifetime of the object, so that tests of refusals
// ("needs N of host memory, but M are available") do not depend on the machine.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace flaxpp::testing {

class HostMemoryLimit {
 public:
  explicit HostMemoryLimit(std::uint64_t bytes) {
    ::setenv("FLAXPP_HOST_MEMORY_LIMIT", std::to_string(bytes).c_str(), 1);
  }
  ~HostMemoryLimit() { ::unsetenv("FLAXPP_HOST_MEMORY_LIMIT"); }
  HostMemoryLimit(const HostMemoryLimit&) = delete;
  HostMemoryLimit& operator=(const HostMemoryLimit&) = delete;
};

}  // namespace flaxpp::testing
