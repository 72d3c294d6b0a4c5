// train::fit: the training loop (flaxpp/train/fit.hpp).
#include "flaxpp/train/fit.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>

#include "flaxpp/core/error.hpp"
#include "flaxpp/dist/communicator.hpp"
#include "flaxpp/dist/replicated.hpp"
#include "flaxpp/io/checkpoint.hpp"

namespace flaxpp::train {
namespace {

using Clock = std::chrono::steady_clock;

// A non-finite loss as text: "nan" whatever its sign bit, "inf", "-inf".
std::string loss_text(float loss) {
  return std::isnan(loss) ? "nan" : detail::str(loss);
}

// Batches of an epoch of `rows` >= 1 rows (without overflow for any batch_size >= 1).
std::int64_t batches_of(std::int64_t rows, std::int64_t batch_size) {
  return (rows - 1) / batch_size + 1;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The run: its options, data, shape and the state of the checkpoint on disk.
class Run {
 public:
  Run(ClassifierStep& step, TrainState& state, const Rows& train, const Rows& test,
      const FitOptions& o, FitObserver& observer)
      : step_(step), state_(state), train_(train), test_(test), o_(o), observer_(observer) {
    check_options();
    batch_rows_ = std::min(o.batch_size, train.count);
    steps_per_epoch_ = batches_of(train.count, o.batch_size);
    total_steps_ = o.epochs * steps_per_epoch_;
    result_.saved_step = o.saved_step;
    train_metrics_rows_ = first_rows(std::min(train.count, o.train_metrics_rows));
    test_metrics_rows_ = first_rows(test.count);
  }

  FitResult operator()() {
    if (o_.resume && !o_.checkpoint.empty() && std::filesystem::exists(o_.checkpoint)) {
      state_ = step_.restore(io::load_checkpoint(o_.checkpoint));
      result_.saved_step = state_.step;
    }
    if (!train_loop()) return result_;
    observer_.pause();
    // The last epoch's evaluation is of these parameters already, unless the run took no step.
    result_.test_accuracy = !result_.epochs.empty() && result_.epochs.back().step == state_.step
                                ? result_.epochs.back().test_accuracy
                                : evaluate(test_, test_metrics_rows_, "evaluate test").second;
    return result_;
  }

 private:
  void check_options() const {
    auto refuse = [](const std::string& what) { throw ValueError("train::fit: " + what); };
    if (train_.count < 1 || test_.count < 1)
      refuse(detail::str("the training and the test set need a row each; got ", train_.count,
                         " and ", test_.count, " rows"));
    if (o_.epochs < 1) refuse(detail::str("epochs must be at least 1, got ", o_.epochs));
    if (o_.batch_size < 1)
      refuse(detail::str("batch_size must be at least 1, got ", o_.batch_size));
    if (o_.train_metrics_rows < 1)
      refuse(detail::str("train_metrics_rows must be at least 1, got ", o_.train_metrics_rows));
    const std::int64_t spe = batches_of(train_.count, o_.batch_size);
    if (o_.epochs > std::numeric_limits<std::int32_t>::max() / spe)
      refuse(detail::str(o_.epochs, " epochs of ", spe,
                         " steps exceed a checkpoint's int32 step counter; train fewer epochs"));
    if (const int size = processes(); size > 1) {
      const std::int64_t smallest =
          std::min(smallest_batch_rows(train_.count, o_.batch_size), test_.count);
      if (smallest < size)
        refuse(detail::str("a batch or the test set has as few as ", smallest,
                           " rows, fewer than the ", size,
                           " processes, each of which needs a row of each; use a larger "
                           "batch_size or fewer processes"));
    }
  }

  int processes() const { return step_.communicator() ? step_.communicator()->size() : 1; }
  bool writes() const { return !step_.communicator() || step_.communicator()->rank() == 0; }

  // This process's positions of `positions`.
  std::vector<std::int64_t> shard(std::vector<std::int64_t> positions) const {
    const dist::Communicator* comm = step_.communicator();
    if (!comm) return positions;
    const auto [begin, end] =
        dist::shard_bounds(static_cast<std::int64_t>(positions.size()), comm->rank(), comm->size());
    return {positions.begin() + begin, positions.begin() + end};
  }

  // This process's shard of the first `n` positions: what it evaluates.
  std::vector<std::int64_t> first_rows(std::int64_t n) const {
    std::vector<std::int64_t> all(static_cast<std::size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    return shard(std::move(all));
  }

  // Mean loss and accuracy over `mine`, positions of `rows`, a batch at a time.
  std::pair<float, float> evaluate(const Rows& rows, const std::vector<std::int64_t>& mine,
                                   const std::string& what) {
    const auto count = static_cast<std::int64_t>(mine.size());
    const auto result =
        step_.evaluate(state_, count, batch_rows_, [&](std::int64_t begin, std::int64_t end) {
          observer_.evaluating(what, begin, count);
          const data::Dataset b = rows.take(std::span(mine).subspan(
              static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)));
          return std::pair{b.x, b.y};
        });
    observer_.pause();
    return result;
  }

  // Ends the run on something non-finite (false), or tells the observer and goes on (true).
  bool nonfinite(const std::string& what) {
    if (o_.on_nonfinite == OnNonfinite::keep_going) {
      observer_.nonfinite(what);
      return true;
    }
    observer_.pause();
    result_.end = FitResult::End::nonfinite;
    result_.nonfinite = what;
    return false;
  }

  // Saves the state, unless it is not finite and the options say stop (then false).
  bool save() {
    if (o_.on_nonfinite == OnNonfinite::stop)
      for (const auto& [name, tree] :
           {std::pair{"params", &state_.params}, std::pair{"opt_state", &state_.opt_state},
            std::pair{"batch_stats", &state_.batch_stats}})
        if (const auto path = first_nonfinite(*tree))
          return nonfinite(detail::str("the ", name, " leaf ", *path, " became non-finite by step ",
                                       state_.step));
    if (dist::Communicator* comm = step_.communicator(); comm && comm->size() > 1) {
      dist::check_replicated(*comm, state_.params, "parameters");
      if (!state_.batch_stats.leaves().empty())
        dist::check_replicated(*comm, state_.batch_stats, "batch statistics");
    }
    if (!o_.checkpoint.empty()) {
      if (writes()) io::save_checkpoint(o_.checkpoint, state_.to_tree());
      result_.saved_step = state_.step;
    }
    observer_.saved(state_);
    return true;
  }

  // The epochs' steps; false when the run ended before its last step was taken.
  bool train_loop() {
    std::vector<std::vector<std::int64_t>> batches;
    std::int64_t batches_epoch = -1, done = 0;
    double loss_sum = 0;
    float batch_accuracy = 0;
    auto epoch_start = Clock::now();
    while (state_.step < total_steps_) {
      const bool requested = observer_.stop_requested();
      if (requested || (o_.max_steps && state_.step >= *o_.max_steps)) {
        observer_.pause();
        result_.end = requested ? FitResult::End::stop_requested : FitResult::End::max_steps;
        // A stop where the checkpoint already is writes nothing.
        if (state_.step != result_.saved_step) save();
        return false;
      }
      const std::int64_t epoch = state_.step / steps_per_epoch_, b = state_.step % steps_per_epoch_;
      if (epoch != batches_epoch) {
        batches = data::epoch_batches(train_.count, o_.batch_size, o_.seed, epoch, false);
        batches_epoch = epoch;
        epoch_start = Clock::now();
        loss_sum = 0;
        done = 0;
      }
      const data::Dataset batch = train_.take(shard(batches[static_cast<std::size_t>(b)]));
      const float loss = step_(state_, batch.x, batch.y);
      ++result_.steps_taken;
      if (!std::isfinite(loss) &&
          !nonfinite(detail::str("the loss became ", loss_text(loss), " at step ", state_.step,
                                 " (epoch ", epoch + 1, ", batch ", b + 1, " of ", steps_per_epoch_,
                                 ")")))
        return false;
      if (done % 10 == 0) batch_accuracy = step_.evaluate(state_, batch.x, batch.y).second;
      loss_sum += loss;
      ++done;
      const double secs = std::max(seconds_since(epoch_start), 1e-9);
      observer_.step_done({
          .epoch = epoch,
          .batch = b,
          .steps_per_epoch = steps_per_epoch_,
          .loss = loss,
          .mean_loss = loss_sum / static_cast<double>(done),
          .batch_accuracy = batch_accuracy,
          .rows_per_second = static_cast<double>(done * batch_rows_) / secs,
          .seconds_left =
              secs / static_cast<double>(done) * static_cast<double>(total_steps_ - state_.step),
      });
      if (state_.step % steps_per_epoch_ == 0 && !end_epoch(epoch, epoch_start)) return false;
    }
    observer_.pause();
    return true;
  }

  // The epoch's end: its metrics first, then the checkpoint, so that a caller that records
  // the metrics loses no row (a resumed run redoes the epochs past its checkpoint).
  bool end_epoch(std::int64_t epoch, Clock::time_point epoch_start) {
    observer_.pause();
    const auto [train_loss, train_acc] = evaluate(train_, train_metrics_rows_, "evaluate train");
    const auto [test_loss, test_acc] = evaluate(test_, test_metrics_rows_, "evaluate test");
    const EpochMetrics m{epoch + 1,
                         state_.step,
                         train_loss,
                         train_acc,
                         test_loss,
                         test_acc,
                         seconds_since(epoch_start)};
    result_.epochs.push_back(m);
    if (!std::isfinite(train_loss) || !std::isfinite(test_loss)) {
      const bool train_bad = !std::isfinite(train_loss);
      if (!nonfinite(detail::str("the loss over the ", train_bad ? "training" : "test",
                                 " set became ", loss_text(train_bad ? train_loss : test_loss),
                                 " at the end of epoch ", epoch + 1)))
        return false;
    }
    observer_.epoch_done(m);
    return save();
  }

  ClassifierStep& step_;
  TrainState& state_;
  const Rows& train_;
  const Rows& test_;
  const FitOptions& o_;
  FitObserver& observer_;
  std::int64_t batch_rows_ = 0, steps_per_epoch_ = 0, total_steps_ = 0;
  // This process's positions of the rows each epoch's metrics are measured on.
  std::vector<std::int64_t> train_metrics_rows_, test_metrics_rows_;
  FitResult result_;
};

}  // namespace

Rows Rows::of(const data::Dataset& ds) {
  return {
      .count = ds.x.shape().rank() > 0 ? ds.x.shape()[0] : 0,
      .take = [ds](std::span<const std::int64_t> positions) { return data::take(ds, positions); }};
}

FitResult fit(ClassifierStep& step, TrainState& state, const Rows& train, const Rows& test,
              const FitOptions& options, FitObserver& observer) {
  return Run(step, state, train, test, options, observer)();
}

FitResult fit(ClassifierStep& step, TrainState& state, const Rows& train, const Rows& test,
              const FitOptions& options) {
  FitObserver quiet;
  return fit(step, state, train, test, options, quiet);
}

std::int64_t smallest_batch_rows(std::int64_t rows, std::int64_t batch_size) {
  return rows - (batches_of(rows, batch_size) - 1) * batch_size;
}

std::optional<std::string> first_nonfinite(const Tree& tree) {
  for (const auto& [path, a] : tree.flatten()) {
    bool finite = true;
    if (a.dtype() == DType::f32)
      for (const float v : a.to_vector<float>())
        finite = finite && std::isfinite(v);
    if (a.dtype() == DType::f64)
      for (const double v : a.to_vector<double>())
        finite = finite && std::isfinite(v);
    if (!finite) return path;
  }
  return std::nullopt;
}

}  // namespace flaxpp::train
