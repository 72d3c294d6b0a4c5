// The subcommands of the `flaxpp` tool. Each takes its own arguments (after the subcommand
// name) and returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace flaxpp::cli {

int check_command(const std::vector<std::string>& args);
int residuals_command(const std::vector<std::string>& args);
int train_command(const std::vector<std::string>& args);
int bench_command(const std::vector<std::string>& args);

}  // namespace flaxpp::cli
