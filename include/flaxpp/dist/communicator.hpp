// flaxpp/dist/communicator.hpp — collectives over the job's processes, on Arrays of every
// dtype: NCCL for arrays on a GPU, MPI for arrays in host memory, nothing at all in a job of
// one. Every process must call the same collectives in the same order with arrays of the same
// aval. A collective that does not complete within FLAXPP_COLLECTIVE_TIMEOUT seconds (default
// 300) throws DistributedError naming this rank and the operation: a peer died, stalled, or
// called another collective.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "flaxpp/core/array.hpp"

namespace flaxpp::dist {

enum class ReduceOp : std::uint8_t { sum, mean, max };
std::string_view reduce_op_name(ReduceOp op);  // "sum", "mean", "max"
ReduceOp reduce_op_from_name(std::string_view name);

// What a communicator's collectives cost so far: how many, the bytes of their arguments, and
// the seconds the calling thread spent in them (waiting for the slowest peer included; on a
// GPU, NCCL's enqueueing, its kernels run on the stream).
struct CommunicatorStats {
  std::int64_t calls = 0;
  std::int64_t bytes = 0;
  double seconds = 0;
};

// A collective in flight (Communicator::start_all_reduce). done() says whether it completed,
// moving it on (MPI advances a non-blocking collective only inside its calls); wait()
// completes it and returns the result, with the same errors and time limit as the blocking
// collective. A handle is waited for once.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual bool done() = 0;
  virtual Array wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }

  // The elementwise reduction of x over every process (mean: the sum divided by size(), for
  // floating dtypes), on x's device.
  Array all_reduce(const Array& x, ReduceOp op);
  // all_reduce started, to be completed by the handle's wait(), so that the caller computes
  // while the processes exchange (DDP's overlap of the gradient buckets with the backward
  // pass). Every process starts the same collectives in the same order. MPI hands back its
  // MPI_Iallreduce and NCCL its launch on a stream of its own; a job of one completes it here.
  std::unique_ptr<PendingCollective> start_all_reduce(const Array& x, ReduceOp op);
  // start_all_reduce into x's own buffer (MPI_IN_PLACE, NCCL's in-place all-reduce): wait()
  // returns x, holding the reduction. No memory beyond x's, as DDP reduces its gradient
  // buckets where they were packed. The caller holds x's buffer alone and touches it only
  // after wait(). Sum or max: a mean's division would need a buffer of its own.
  std::unique_ptr<PendingCollective> start_all_reduce_in_place(const Array& x, ReduceOp op);
  // x of process `root` on every process.
  Array broadcast(const Array& x, int root);
  // Every process's x stacked along a new leading axis of size().
  Array all_gather(const Array& x);
  // Returns once every process has called it.
  void barrier();

  const CommunicatorStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 protected:
  Communicator(int rank, int size) : rank_(rank), size_(size) {}
  // The transport's own work, on arguments all_reduce & co. checked: results on x's device
  // (mean is the sum divided by size(), done by all_reduce).
  virtual Array all_reduce_impl(const Array& x, ReduceOp op) = 0;
  // By default all_reduce_impl, completed at once.
  virtual std::unique_ptr<PendingCollective> start_all_reduce_impl(const Array& x, ReduceOp op);
  // By default all_reduce_impl, completed at once and copied into x's buffer.
  virtual std::unique_ptr<PendingCollective> start_all_reduce_in_place_impl(const Array& x,
                                                                            ReduceOp op);
  virtual Array broadcast_impl(const Array& x, int root) = 0;
  virtual Array all_gather_impl(const Array& x) = 0;
  virtual void barrier_impl() = 0;

 private:
  template <class F>
  auto timed(const Array* x, F&& f);

  int rank_, size_;
  CommunicatorStats stats_;
};

// The job's communicator over every process (init() first in a multi-process job).
Communicator& world();

}  // namespace flaxpp::dist
