// Starting flaxpp as a job of N processes on this machine under Open MPI's mpirun, for
// `flaxpp launch` and `flaxpp bench --processes`.
#pragma once

#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

namespace flaxpp::cli {

// mpirun (FLAXPP_MPIRUN, else "mpirun" on the PATH) running this flaxpp executable with `args`
// as `processes` processes: with --allow-run-as-root under root, and --oversubscribe when
// there are more processes than cores.
std::vector<std::string> mpirun_command(std::int64_t processes,
                                        const std::vector<std::string>& args);

// Sets FLAXPP_NUM_THREADS, the threads of each matrix product whatever its engine
// (flaxpp/backend/cpu.hpp), to `threads` for the processes this one starts, unless it is set
// (overwrite: always).
void set_product_threads(std::int64_t threads, bool overwrite);

// Set (to 1) by flaxpp launch for the processes it starts: SIGUSR1 and SIGUSR2, which mpirun
// forwards to them, stand for the SIGINT and SIGTERM that launch received.
inline constexpr const char* kLaunchStopSignalsEnv = "FLAXPP_LAUNCH_STOP_SIGNALS";

// Whether flaxpp launch started this process (kLaunchStopSignalsEnv is set).
bool launched();

// The stop signal `signal` stands for under flaxpp launch: SIGINT for SIGUSR1, SIGTERM for
// SIGUSR2, any other signal itself.
constexpr int launched_stop_signal(int signal) {
  return signal == SIGUSR1 ? SIGINT : (signal == SIGUSR2 ? SIGTERM : signal);
}

// Under flaxpp launch, makes SIGUSR1 and SIGUSR2 end this process as SIGINT and SIGTERM would
// (a command that stops cleanly on them, flaxpp train, installs its own handlers later);
// nothing otherwise.
void take_launch_stop_signals();

// The cores of this machine (at least 1).
std::int64_t cores();

// What to say when mpirun cannot be started.
std::string no_mpirun_hint(const std::string& program);

}  // namespace flaxpp::cli
