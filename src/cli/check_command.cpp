// `flaxpp check FILE… [--device cpu|cuda] [--verbose] [--case-timeout SECONDS]`
// (refs-format.md, "flaxpp check"): refs::check_main over the built-in problems.
#include "cli/commands.hpp"
#include "flaxpp/io/refs.hpp"

namespace flaxpp::cli {

int check_command(const std::vector<std::string>& args) {
  return refs::check_main(args, refs::ProblemRegistry::builtin(), "flaxpp check");
}

}  // namespace flaxpp::cli
