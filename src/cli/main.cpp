// `flaxpp`: the command-line tool. Dispatches to a subcommand.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "flaxpp/core/error.hpp"

namespace {

constexpr const char* kUsage =
    "usage: flaxpp <command> [arguments]\n"
    "\n"
    "commands:\n"
    "  check FILE... [--device cpu|cuda] [--verbose]\n"
    "      run reference cases (format flaxpp.refs/1) and compare with JAX/Flax's outputs\n"
    "  train CONFIG.json [--max-steps N]\n"
    "      train an MLP classifier (see examples/digits.json); ends with \"test accuracy: "
    "0.NNNN\"\n"
    "  bench [--grid default|large] [--out FILE.jsonl]\n"
    "      time MLP training steps per width and remat policy (JSON lines; compare with JAX)\n"
    "  residuals FUNCTION [--policy SPEC] [-N rows] [-d dim]\n"
    "      the values a checkpointed function saves for its backward pass, with bytes and peak\n"
    "\n"
    "flaxpp <command> --help shows a command's options.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "check") return flaxpp::cli::check_command(args);
    if (command == "residuals") return flaxpp::cli::residuals_command(args);
    if (command == "train") return flaxpp::cli::train_command(args);
    if (command == "bench") return flaxpp::cli::bench_command(args);
  } catch (const flaxpp::Error& e) {
    std::cerr << "flaxpp " << command << ": " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "flaxpp " << command << ": unexpected error: " << e.what() << "\n";
    return 2;
  }
  std::cerr << "flaxpp: unknown command \"" << command << "\"\n\n" << kUsage;
  return 2;
}
