// flaxpp/dist/process_group.hpp — the processes of a data-parallel job: who this process is
// among them, from the launcher's environment (jax.distributed.initialize's role). Under
// `mpirun -np N` the job is Open MPI's; a process started on its own is a job of one.
#pragma once

#include <string>

namespace flaxpp::dist {

// Joins the job's process group (once per process; later calls return at once). Under Open
// MPI's launcher (OMPI_COMM_WORLD_SIZE set) it initialises MPI, which needs a build with MPI
// (FLAXPP_WITH_MPI; a clear DistributedError otherwise). A process started on its own joins
// a job of one. FLAXPP_WORLD_SIZE and FLAXPP_RANK, when set, must agree with the launcher's.
void init();
bool is_initialized();

int rank();        // 0 .. world_size() - 1 (0 before init())
int world_size();  // 1 before init(), and for a process started on its own
int local_rank();  // the rank among this machine's processes (its GPU)

// "1 process", or "2 processes (Open MPI 4.1.4)": for logs.
std::string describe();

// Ends every process of the job now with `code`, after an error on this one that the others
// cannot see (a collective that timed out, a file this process could not read): under MPI,
// MPI_Abort (mpirun then ends the others and names this rank); alone, exit. The CLI calls it
// for every error of a job of several processes.
[[noreturn]] void abort_job(int code);

}  // namespace flaxpp::dist
