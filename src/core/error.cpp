// Internal-invariant failure reporting (FLAXPP_ASSERT).
#include "flaxpp/core/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace flaxpp::detail {

void assertion_failed(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "flaxpp internal error: %s:%d: assertion `%s` failed%s%s\n", file, line,
               expr, msg.empty() ? "" : ": ", msg.c_str());
  std::abort();
}

}  // namespace flaxpp::detail
