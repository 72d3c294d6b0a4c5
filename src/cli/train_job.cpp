// A `flaxpp train` job of one or several processes: shards, the leader's state, replica checks.
#include "cli/train_job.hpp"

#include <algorithm>
#include <numeric>

#include "flaxpp/core/device.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/dist/process_group.hpp"
#include "flaxpp/dist/replicated.hpp"

namespace flaxpp::cli {

TrainJob TrainJob::join() {
  dist::init();
  TrainJob job;
  job.rank_ = dist::rank();
  job.size_ = dist::world_size();
  if (job.size_ > 1) {
    job.comm_ = &dist::world();
    if (default_device().kind == DeviceKind::cuda)
      set_default_device(Device::cuda(dist::local_rank()));
  }
  return job;
}

void TrainJob::check_shards(const io::TrainConfig& config, const TrainPlan& plan,
                            const TrainData& data) const {
  if (size_ == 1) return;
  // The smallest batch: the last one of an epoch when batch_size does not divide the rows.
  const std::int64_t last = plan.train_rows - (plan.steps_per_epoch - 1) * config.batch_size;
  const std::int64_t smallest = std::min(plan.batch_rows, last);
  if (smallest < size_)
    throw ValueError(detail::str(
        "$.batch_size: ", config.batch_size, " over the ", plan.train_rows,
        " training rows gives batches of as few as ", smallest, " rows, fewer than the ", size_,
        " processes of this job, each of which needs a row of every batch; use a batch_size "
        "whose batches all have at least ", size_, " rows, or fewer processes"));
  const std::int64_t test_rows = data.test.y.shape()[0];
  if (test_rows < size_)
    throw ValueError(detail::str("$.data.test_fraction: the test set has ", test_rows,
                                 " rows, fewer than the ", size_,
                                 " processes of this job; raise it or use fewer processes"));
}

std::vector<std::int64_t> TrainJob::shard(const std::vector<std::int64_t>& rows) const {
  const auto [begin, end] =
      dist::shard_bounds(static_cast<std::int64_t>(rows.size()), rank_, size_);
  return {rows.begin() + begin, rows.begin() + end};
}

data::Dataset TrainJob::shard(const data::Dataset& set) const {
  if (size_ == 1) return set;
  std::vector<std::int64_t> rows(static_cast<std::size_t>(set.y.shape()[0]));
  std::iota(rows.begin(), rows.end(), std::int64_t{0});
  return data::take(set, shard(rows));
}

void TrainJob::share_leader_state(train::TrainState& state, std::int64_t& saved_step) const {
  if (size_ == 1) return;
  state.params = dist::broadcast_tree(*comm_, state.params);
  state.opt_state = dist::broadcast_tree(*comm_, state.opt_state);
  // Steps are int32 in checkpoints (TrainPlan keeps them below 2^31).
  const std::vector<std::int32_t> steps =
      comm_
          ->broadcast(Array::from_vector(
                          std::vector<std::int32_t>{static_cast<std::int32_t>(state.step),
                                                    static_cast<std::int32_t>(saved_step)},
                          Shape{2}, Device::cpu()),
                      0)
          .to_vector<std::int32_t>();
  state.step = steps[0];
  saved_step = steps[1];
}

void TrainJob::check_replicas(const train::TrainState& state) const {
  if (size_ > 1) dist::check_replicated(*comm_, state.params, "parameters");
}

bool TrainJob::any(bool flag) const {
  if (size_ == 1) return flag;
  return comm_->all_reduce(Array::from_vector(std::vector<bool>{flag}, Shape{1}, Device::cpu()),
                           dist::ReduceOp::max)
      .to_vector<bool>()[0];
}

}  // namespace flaxpp::cli
