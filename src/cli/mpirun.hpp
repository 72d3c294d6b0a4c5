// Starting flaxpp as a job of N processes on this machine under Open MPI's mpirun, for
// `flaxpp launch` and `flaxpp bench --processes`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flaxpp::cli {

// mpirun (FLAXPP_MPIRUN, else "mpirun" on the PATH) running this flaxpp executable with `args`
// as `processes` processes: with --allow-run-as-root under root, and --oversubscribe when
// there are more processes than cores.
std::vector<std::string> mpirun_command(std::int64_t processes,
                                        const std::vector<std::string>& args);

// Sets OPENBLAS_NUM_THREADS to `threads` unless it is set (overwrite: always).
void set_blas_threads(std::int64_t threads, bool overwrite);

// The cores of this machine (at least 1).
std::int64_t cores();

// What to say when mpirun cannot be started.
std::string no_mpirun_hint(const std::string& program);

}  // namespace flaxpp::cli
