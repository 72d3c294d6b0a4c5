// Private to the dist layer: the transports under dist::world() (MPI for host memory, NCCL
// for GPU memory, none in a job of one), the collective time limit, and the message of a
// collective that did not complete.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "flaxpp/dist/communicator.hpp"

namespace flaxpp::dist::detail {

// FLAXPP_COLLECTIVE_TIMEOUT (seconds, default 300).
std::chrono::duration<double> collective_timeout();

// The DistributedError of a collective that did not complete in time on this rank.
[[noreturn]] void throw_timed_out(int rank, int size, const char* op, const Array& x);

// A job of one: every collective is the identity (all_gather adds an axis of 1).
std::unique_ptr<Communicator> local_communicator();

#ifdef FLAXPP_WITH_MPI
// Host memory over MPI_COMM_WORLD (MPI must be initialised); arrays elsewhere are copied to
// the host and back.
std::unique_ptr<Communicator> mpi_communicator();
void mpi_init();
bool mpi_initialized();
[[noreturn]] void mpi_abort(int code);
std::string mpi_library();
int mpi_rank();
int mpi_size();
#endif

#ifdef FLAXPP_WITH_NCCL
// GPU memory over NCCL: one communicator per process on the GPU of its local rank, its unique
// id broadcast over `bootstrap` (MPI), or made in-process for a job of one.
std::unique_ptr<Communicator> nccl_communicator(int rank, int size, int local_rank,
                                                Communicator* bootstrap);
#endif

}  // namespace flaxpp::dist::detail
