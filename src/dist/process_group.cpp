// The job's process group, read from the launcher: Open MPI's environment (MPI initialised
// here), or a process on its own.
#include "flaxpp/dist/process_group.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "dist/transport.hpp"
#include "flaxpp/core/error.hpp"

namespace flaxpp::dist {
namespace {

struct Group {
  std::mutex mutex;
  bool initialized = false, mpi = false;
  int rank = 0, size = 1, local_rank = 0;
};

Group& group() {
  static auto* const g = new Group();
  return *g;
}

// An integer environment variable, or `fallback` when unset; a clear error when malformed.
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 0 || n > 1 << 20)
    throw DistributedError(::flaxpp::detail::str(name, "=", v, ": expected a non-negative integer"));
  return static_cast<int>(n);
}

}  // namespace

void init() {
  Group& g = group();
  std::lock_guard lock(g.mutex);
  if (g.initialized) return;
  const int launched = env_int("OMPI_COMM_WORLD_SIZE", 0);
  if (launched > 1) {
#ifdef FLAXPP_WITH_MPI
    detail::mpi_init();
    g.mpi = true;
    g.rank = detail::mpi_rank();
    g.size = detail::mpi_size();
    g.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
#else
    throw DistributedError(::flaxpp::detail::str(
        "this process is one of ", launched,
        " started by mpirun, but this flaxpp was built without MPI (FLAXPP_WITH_MPI=OFF): "
        "install Open MPI (apt-get install libopenmpi-dev openmpi-bin) and rebuild, or run one "
        "process"));
#endif
  }
  const int asked = env_int("FLAXPP_WORLD_SIZE", -1);
  if (asked > 1 && !g.mpi)
    throw DistributedError(::flaxpp::detail::str(
        "FLAXPP_WORLD_SIZE=", asked, " asks for ", asked,
        " processes, but this one was not started by a launcher flaxpp can join: start the job "
        "with `mpirun -np ", asked, " ...` (or `flaxpp launch -n ", asked, " -- ...`)"));
  if (asked != -1 && asked != g.size)
    throw DistributedError(::flaxpp::detail::str("FLAXPP_WORLD_SIZE=", asked, " but the launcher started ",
                                                 g.size, " processes"));
  if (const int r = env_int("FLAXPP_RANK", -1); r != -1 && r != g.rank)
    throw DistributedError(::flaxpp::detail::str("FLAXPP_RANK=", r, " but the launcher made this process rank ",
                                                 g.rank));
  g.initialized = true;
}

bool is_initialized() {
  Group& g = group();
  std::lock_guard lock(g.mutex);
  return g.initialized;
}

int rank() {
  return group().rank;
}
int world_size() {
  return group().size;
}
int local_rank() {
  return group().local_rank;
}

std::string describe() {
  Group& g = group();
  if (g.size == 1) return "1 process";
#ifdef FLAXPP_WITH_MPI
  if (g.mpi) return ::flaxpp::detail::str(g.size, " processes (", detail::mpi_library(), ")");
#endif
  return ::flaxpp::detail::str(g.size, " processes");
}

void abort_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef FLAXPP_WITH_MPI
  if (group().mpi) detail::mpi_abort(code);
#endif
  std::exit(code);
}

}  // namespace flaxpp::dist
