// `flaxpp launch -n N [--] COMMAND ARGS...`: runs `flaxpp COMMAND ARGS...` as a job of N
// processes under Open MPI's mpirun (the launcher flaxpp::dist joins), e.g.
// `flaxpp launch -n 2 -- train cfg.json`. It adds what a job on one machine needs: mpirun's
// consent to run as root, oversubscription when N exceeds the cores, and an even share of the
// cores as each process's product threads (unless FLAXPP_NUM_THREADS is set).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/mpirun.hpp"

namespace flaxpp::cli {
namespace {

constexpr const char* kLaunchUsage =
    "usage: flaxpp launch -n N [--] COMMAND [ARGS...]\n"
    "  Runs flaxpp COMMAND ARGS... as N processes on this machine under Open MPI's mpirun\n"
    "  (FLAXPP_MPIRUN names another one), e.g. flaxpp launch -n 2 -- train cfg.json: the\n"
    "  processes train data-parallel (see flaxpp help train). Each process's matrix products\n"
    "  get cores / N threads unless FLAXPP_NUM_THREADS is set. For several machines, run\n"
    "  mpirun yourself:\n"
    "  mpirun -np N --hostfile HOSTS flaxpp train cfg.json.\n"
    "  -n, --processes N  how many processes (1 to 1024)\n";

}  // namespace

int launch_command(const std::vector<std::string>& args) {
  std::int64_t processes = 0;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kLaunchUsage;
      return 0;
    } else if (a == "-n" || a == "--processes") {
      processes = parse_int_option(a, option_value(args, i), 1, 1024);
    } else if (a == "--") {
      ++i;
      break;
    } else if (a.starts_with("-")) {
      throw UsageError(detail::str("unknown option ", a));
    } else {
      break;
    }
  }
  if (processes == 0) throw UsageError("-n N (how many processes) is required");
  if (i == args.size()) throw UsageError("no command to launch; e.g. flaxpp launch -n 2 -- train cfg.json");
  if (args[i] == "launch") throw UsageError("flaxpp launch cannot launch itself");

  set_product_threads(cores() / processes, false);
  std::vector<std::string> argv =
      mpirun_command(processes, std::vector<std::string>(args.begin() + static_cast<std::ptrdiff_t>(i), args.end()));
  std::vector<char*> c_argv;
  for (std::string& s : argv)
    c_argv.push_back(s.data());
  c_argv.push_back(nullptr);
  std::cout.flush();
  ::execvp(c_argv[0], c_argv.data());
  const int err = errno;
  throw Error(detail::str("cannot run ", argv[0], " (", std::strerror(err),
                          "): ", no_mpirun_hint(argv[0])));
}

}  // namespace flaxpp::cli
