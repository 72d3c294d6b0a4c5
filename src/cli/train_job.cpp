// A `flaxpp train` job of one or several processes: shards, the leader's state, replica checks.
#include "cli/train_job.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "cli/sha256.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/dist/process_group.hpp"
#include "flaxpp/dist/replicated.hpp"
#include "flaxpp/train/fit.hpp"

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

namespace {

constexpr std::size_t kWords = 8;  // a SHA-256 as 32-bit words

// A SHA-256 in hex as its eight 32-bit words, appended to `out`.
void append_words(const std::string& hex, std::vector<std::uint32_t>& out) {
  for (std::size_t w = 0; w < kWords; ++w)
    out.push_back(static_cast<std::uint32_t>(std::stoul(hex.substr(8 * w, 8), nullptr, 16)));
}

}  // namespace

void TrainJob::check_agreement(const io::TrainConfig& config, const TrainData& data) const {
  if (size_ == 1) return;
  io::Json settings = config.run_identity();
  settings["epochs"] = config.epochs;
  settings["policy"] = config.model.policy->str();
  std::vector<std::uint32_t> mine;
  append_words(sha256_hex(settings.dump()), mine);
  append_words(data.sha256, mine);
  const std::vector<std::uint32_t> all =
      comm_
          ->all_gather(Array::from_vector(mine, Shape{static_cast<std::int64_t>(mine.size())},
                                          Device::cpu()))
          .to_vector<std::uint32_t>();
  const bool lm = config.model.kind == io::TrainConfig::Kind::lm;
  for (int rank = 1; rank < size_; ++rank) {
    const std::uint32_t* theirs = all.data() + static_cast<std::size_t>(rank) * 2 * kWords;
    if (!std::equal(theirs, theirs + kWords, all.data()))
      throw ValueError(detail::str(
          "process ", rank, " of ", size_,
          " has another config than process 0: its $.data, $.model, $.optimizer, $.batch_size, "
          "$.seed, $.epochs or $.model.policy differ. Every process of a job trains the same "
          "run; give them all the same config"));
    if (!std::equal(theirs + kWords, theirs + 2 * kWords, all.data() + kWords))
      throw ValueError(detail::str(
          lm ? "$.data.text " : "$.data.path ", lm ? config.data.text : config.data.path,
          ": process ", rank, " of ", size_,
          " read another file than process 0 (its content's SHA-256 begins ",
          hex_words({theirs + kWords, 2}), " there, ", hex_words({all.data() + kWords, 2}),
          " on process 0). Every process must read the same data: copy the file to each "
          "machine, or put it on a shared file system"));
  }
}

void TrainJob::check_shards(const io::TrainConfig& config, const TrainPlan& plan,
                            const TrainData& data) const {
  if (size_ == 1) return;
  const std::int64_t smallest = train::smallest_batch_rows(plan.train_rows, config.batch_size);
  if (smallest < size_)
    throw ValueError(detail::str(
        "$.batch_size: ", config.batch_size, " over the ", plan.train_rows,
        " training rows gives batches of as few as ", smallest, " rows, fewer than the ", size_,
        " processes of this job, each of which needs a row of every batch; use a batch_size "
        "whose batches all have at least ",
        size_, " rows, or fewer processes"));
  const auto test_rows = static_cast<std::int64_t>(data.test.size());
  if (test_rows < size_)
    throw ValueError(detail::str("$.data.test_fraction: the test set has ", test_rows,
                                 " rows, fewer than the ", size_,
                                 " processes of this job; raise it or use fewer processes"));
}

void TrainJob::share_leader_state(train::TrainState& state, std::int64_t& saved_step) const {
  if (size_ == 1) return;
  state.params = dist::broadcast_tree(*comm_, state.params);
  state.opt_state = dist::broadcast_tree(*comm_, state.opt_state);
  // Steps are int32 in checkpoints (TrainPlan keeps them below 2^31).
  const std::vector<std::int32_t> steps =
      comm_
          ->broadcast(
              Array::from_vector(std::vector<std::int32_t>{static_cast<std::int32_t>(state.step),
                                                           static_cast<std::int32_t>(saved_step)},
                                 Shape{2}, Device::cpu()),
              0)
          .to_vector<std::int32_t>();
  state.step = steps[0];
  saved_step = steps[1];
}

int TrainJob::max(int value) const {
  if (size_ == 1) return value;
  return comm_
      ->all_reduce(Array::from_vector(std::vector<std::int32_t>{value}, Shape{1}, Device::cpu()),
                   dist::ReduceOp::max)
      .to_vector<std::int32_t>()[0];
}

}  // namespace flaxpp::cli
