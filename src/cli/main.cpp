// `flaxpp`: the command-line tool. Dispatches to a subcommand; `help` and `--version`.
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/mpirun.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/dist/process_group.hpp"

namespace {

constexpr const char* kUsage =
    "usage: flaxpp <command> [arguments]\n"
    "\n"
    "commands:\n"
    "  check FILE... [--device cpu|cuda] [--verbose]\n"
    "      run reference cases (format flaxpp.refs/1) and compare with JAX/Flax's outputs\n"
    "  train CONFIG.json [--max-steps N] [--fresh | --resume]\n"
    "      train an MLP classifier (examples/digits.json) or a character-level language model\n"
    "      (examples/lm.json); ends with \"test accuracy: 0.NNNN\"\n"
    "  generate CHECKPOINT --prompt TEXT [--tokens N] [--temperature T] [--seed S]\n"
    "      sample text from a language model flaxpp train trained\n"
    "  bench [--grid default|large] [--out FILE.jsonl]\n"
    "      time MLP training steps per width and remat policy (JSON lines; compare with JAX)\n"
    "  residuals FUNCTION [--policy SPEC] [-N rows] [-d dim]\n"
    "      the values a checkpointed function saves for its backward pass, with bytes and peak\n"
    "  launch -n N [--] COMMAND [ARGS...]\n"
    "      run flaxpp COMMAND as N data-parallel processes under mpirun (e.g. -- train cfg.json)\n"
    "  help [COMMAND]\n"
    "      this text, or a command's options (the same as flaxpp COMMAND --help)\n"
    "\n"
    "flaxpp --version prints the version and how this flaxpp was built.\n";

using CommandFn = int (*)(const std::vector<std::string>&);

CommandFn find_command(const std::string& name) {
  if (name == "check") return flaxpp::cli::check_command;
  if (name == "residuals") return flaxpp::cli::residuals_command;
  if (name == "train") return flaxpp::cli::train_command;
  if (name == "generate") return flaxpp::cli::generate_command;
  if (name == "bench") return flaxpp::cli::bench_command;
  if (name == "launch") return flaxpp::cli::launch_command;
  return nullptr;
}

// "flaxpp train: ", or "flaxpp train (rank 1 of 2): " in a data-parallel job, whose processes
// may all report the same error.
std::string who(const std::string& command) {
  if (flaxpp::dist::world_size() == 1) return "flaxpp " + command + ": ";
  return flaxpp::detail::str("flaxpp ", command, " (rank ", flaxpp::dist::rank(), " of ",
                             flaxpp::dist::world_size(), "): ");
}

// One write per message, so that the processes of a job do not interleave their lines.
void report(const std::string& message) {
  std::cerr << message << std::flush;
}

int run(const std::string& command, CommandFn fn, const std::vector<std::string>& args) {
  try {
    return fn(args);
  } catch (const flaxpp::cli::UsageError& e) {
    report(who(command) + e.what() + "\n(flaxpp help " + command + " lists its options)\n");
  } catch (const flaxpp::Error& e) {
    report(who(command) + e.what() + "\n");
  } catch (const std::bad_alloc&) {
    report(who(command) + "out of memory; use a smaller model, batch or data set\n");
  } catch (const std::exception& e) {
    // Not one of flaxpp's errors: a defect to report, with what little the library said.
    report(who(command) + "internal error (" + e.what() +
           "); please report it with the command line and input that caused it\n");
  }
  // In a job of several processes the others may be waiting for this one in a collective, and
  // MPI_Finalize at exit would wait for them: end the whole job now (mpirun names this rank).
  if (flaxpp::dist::world_size() > 1) flaxpp::dist::abort_job(2);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  flaxpp::cli::take_launch_stop_signals();
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string& command = args[0];
  if (command == "--help" || command == "-h" || (command == "help" && args.size() == 1)) {
    std::cout << kUsage;
    return 0;
  }
  if (command == "--version" || command == "-V") {
    std::cout << flaxpp::cli::version_text() << "\n";
    return 0;
  }
  if (command == "help") {
    if (const CommandFn fn = find_command(args[1]); fn && args.size() == 2)
      return run(args[1], fn, {"--help"});
    std::cerr << "flaxpp help: expected one command (check, train, generate, bench, residuals, "
                 "launch), got \""
              << args[1] << (args.size() > 2 ? "\" and more" : "\"") << "\n";
    return 2;
  }
  if (const CommandFn fn = find_command(command))
    return run(command, fn, std::vector<std::string>(args.begin() + 1, args.end()));
  std::cerr << "flaxpp: unknown command \"" << command << "\"\n\n" << kUsage;
  return 2;
}
