// The subcommands of the `flaxpp` tool. Each takes its own arguments (after the subcommand
// name) and returns the process exit code; each prints its usage for --help.
#pragma once

#include <string>
#include <vector>

namespace flaxpp::cli {

int check_command(const std::vector<std::string>& args);
int residuals_command(const std::vector<std::string>& args);
int train_command(const std::vector<std::string>& args);
int generate_command(const std::vector<std::string>& args);
int bench_command(const std::vector<std::string>& args);
// Replaces the process with mpirun running N flaxpp processes (returns only by throwing).
int launch_command(const std::vector<std::string>& args);

// "flaxpp 0.1.0 (CUDA backend: on, plots: cairo 1.16.0)".
std::string version_text();

}  // namespace flaxpp::cli
