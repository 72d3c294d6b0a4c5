// `flaxpp --version`: the version and the optional parts this build has.
#include "cli/commands.hpp"
#include "flaxpp/core/error.hpp"

#ifdef FLAXPP_WITH_CAIRO
#include <cairo.h>
#endif

namespace flaxpp::cli {

std::string version_text() {
#ifdef FLAXPP_WITH_CAIRO
  const std::string plots = detail::str("cairo ", cairo_version_string());
#else
  const std::string plots = "none (built without cairo)";
#endif
  return detail::str("flaxpp ", FLAXPP_VERSION, " (CUDA backend: ", FLAXPP_CLI_CUDA ? "on" : "off",
                     ", plots: ", plots, ")");
}

}  // namespace flaxpp::cli
