// The processes a `flaxpp train` runs on: one, or a data-parallel job under a launcher
// (`mpirun -np N flaxpp train ...`, `flaxpp launch`). Every process trains on its shard of
// each global batch, which is the single-process run's batch, in its order, from its seeds, so
// that the result does not depend on the number of processes up to summation order. Process 0
// is the leader: it alone reads and writes the run's files and speaks; the others receive its
// state and stay quiet.
#pragma once

#include <cstdint>
#include <vector>

#include "cli/train_data.hpp"
#include "flaxpp/data/dataset.hpp"
#include "flaxpp/dist/communicator.hpp"
#include "flaxpp/train/train_state.hpp"

namespace flaxpp::cli {

class TrainJob {
 public:
  // Joins the launcher's job (dist::init); a process started on its own is a job of one. In a
  // job of several processes whose default device is a GPU, each process takes the GPU of its
  // local rank.
  static TrainJob join();

  bool leader() const { return rank_ == 0; }
  bool distributed() const { return size_ > 1; }
  // For ClassifierStep::set_communicator: null in a job of one.
  dist::Communicator* communicator() const { return comm_; }

  // Refuses a job whose processes would not train the same run: before any other collective,
  // every process all_gathers digests of its config's run settings (those of run.json, with
  // $.epochs and $.model.policy) and of its data file's content, and every process throws the
  // same ValueError when one differs from process 0's, naming that process and what differs.
  // (Mismatched configs otherwise gave mismatched collectives, a double free or a time-out;
  // another file at the same path trained silently.)
  void check_agreement(const io::TrainConfig& config, const TrainData& data) const;
  // Throws ValueError naming the config key when a batch or the test set has fewer rows than
  // there are processes (every process needs at least one row of each).
  void check_shards(const io::TrainConfig& config, const TrainPlan& plan,
                    const TrainData& data) const;
  // The leader's state (and the step of its checkpoint on disk) on every process.
  void share_leader_state(train::TrainState& state, std::int64_t& saved_step) const;
  // The largest of every process's `value` (e.g. the signal that reached one of them).
  int max(int value) const;

 private:
  dist::Communicator* comm_ = nullptr;
  int rank_ = 0, size_ = 1;
};

}  // namespace flaxpp::cli
