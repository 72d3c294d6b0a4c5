// mpirun command lines for jobs on this machine, and the stop signals of the processes that
// flaxpp launch starts.
#include "cli/mpirun.hpp"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace flaxpp::cli {

std::int64_t cores() {
  return std::max<std::int64_t>(1, std::thread::hardware_concurrency());
}

std::vector<std::string> mpirun_command(std::int64_t processes,
                                        const std::vector<std::string>& args) {
  const char* env = std::getenv("FLAXPP_MPIRUN");
  std::vector<std::string> argv = {env && *env ? env : "mpirun", "-np", std::to_string(processes)};
  if (::geteuid() == 0) argv.emplace_back("--allow-run-as-root");
  if (processes > cores()) argv.emplace_back("--oversubscribe");
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  argv.push_back(ec ? std::string("flaxpp") : self);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

namespace {

extern "C" void end_as_stop_signal(int signal) {
  const int as = launched_stop_signal(signal);
  std::signal(as, SIG_DFL);
  std::raise(as);
}

}  // namespace

bool launched() {
  const char* value = std::getenv(kLaunchStopSignalsEnv);
  return value != nullptr && *value != '\0';
}

void take_launch_stop_signals() {
  if (!launched()) return;
  std::signal(SIGUSR1, end_as_stop_signal);
  std::signal(SIGUSR2, end_as_stop_signal);
}

void set_product_threads(std::int64_t threads, bool overwrite) {
  ::setenv("FLAXPP_NUM_THREADS", std::to_string(std::max<std::int64_t>(1, threads)).c_str(),
           overwrite ? 1 : 0);
}

std::string no_mpirun_hint(const std::string& program) {
  return program +
         " is Open MPI's launcher (Debian: apt-get install openmpi-bin); or set "
         "FLAXPP_MPIRUN to the mpirun to use";
}

}  // namespace flaxpp::cli
