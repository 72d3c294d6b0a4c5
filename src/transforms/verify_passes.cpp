// FLAXPP_VERIFY_PASSES, read once.
#include "transforms/verify_passes.hpp"

#include <cstdlib>
#include <string>

namespace flaxpp::transforms {

bool verify_passes() {
#ifndef NDEBUG
  return true;
#else
  static const bool on = [] {
    const char* env = std::getenv("FLAXPP_VERIFY_PASSES");
    return env != nullptr && *env != '\0' && std::string(env) != "0";
  }();
  return on;
#endif
}

void verify_if_asked(const ir::Graph& graph) {
  if (verify_passes()) graph.verify();
}

}  // namespace flaxpp::transforms
