// flaxpp/train/fit.hpp — train::fit, the training loop (`flaxpp train` is a client of it):
// epochs of shuffled batches through a ClassifierStep, each epoch's metrics, a checkpoint at
// every epoch's end (atomically replaced), resume from it, a stop on request at a step
// boundary with a checkpoint, and a non-finite loss or state stopping the run without saving
// it (or, asked to, training on). Data-parallel when the step has a communicator: every
// process calls fit with the same data and options, trains on its shard of each batch, and
// process 0 alone writes the checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "flaxpp/core/tree.hpp"
#include "flaxpp/data/dataset.hpp"
#include "flaxpp/train/train_state.hpp"

namespace flaxpp::train {

// A data set gathered as it is needed: `count` rows, and the rows at given positions (each in
// [0, count)) as (x, y). From memory (Rows::of), or read from a file a batch at a time.
struct Rows {
  std::int64_t count = 0;
  std::function<data::Dataset(std::span<const std::int64_t> positions)> take{};

  // The rows of a data set held in memory.
  static Rows of(const data::Dataset& ds);
};

// What a non-finite loss or state does: stop without saving it (the checkpoint on disk stays
// the last finite state), or train on regardless.
enum class OnNonfinite { stop, keep_going };

struct FitOptions {
  std::int64_t epochs = 1;
  // Rows per step; the last batch of an epoch is shorter when it does not divide the rows, and
  // an epoch is one batch of them all when it exceeds them.
  std::int64_t batch_size = 32;
  // The batches of epoch e are data::epoch_batches(rows, batch_size, seed, e): a run's batches
  // depend on the seed alone, so a resumed run takes the uninterrupted one's.
  std::uint64_t seed = 0;
  // Stop (with a checkpoint) once state.step reaches it; 0 saves the initial state.
  std::optional<std::int64_t> max_steps{};
  // The checkpoint file (io::save_checkpoint: its format from the extension). Empty: none.
  std::string checkpoint{};
  // Resume from `checkpoint` when it exists (ClassifierStep::restore checks it). A caller that
  // restored the state itself passes false and says the restored step in saved_step.
  bool resume = true;
  // The step of the state already in `checkpoint` (-1: none of this run's): a stop at that
  // step writes nothing.
  std::int64_t saved_step = -1;
  OnNonfinite on_nonfinite = OnNonfinite::stop;
  // Each epoch's training metrics are of its last parameters on the training set's first rows,
  // at most this many (so that evaluation costs the same however large the data); the test
  // set's are of all of it.
  std::int64_t train_metrics_rows = 10000;
};

struct EpochMetrics {
  std::int64_t epoch = 0, step = 0;  // 1-based epoch; steps taken at its end
  float train_loss = 0, train_accuracy = 0, test_loss = 0, test_accuracy = 0;
  double seconds = 0;
};

// A step's progress, for a display.
struct StepProgress {
  std::int64_t epoch = 0, batch = 0, steps_per_epoch = 0;  // 0-based epoch and batch
  float loss = 0;
  double mean_loss = 0;        // of the epoch's steps so far
  float batch_accuracy = 0;    // of a recent batch (measured every 10th step)
  double rows_per_second = 0;  // this epoch's
  double seconds_left = 0;     // the run's, at this epoch's pace
};

// What fit tells its caller as it goes; every member does nothing by default. Called on every
// process of a data-parallel job.
class FitObserver {
 public:
  virtual ~FitObserver() = default;
  // Asked before every step: true ends the run at this boundary with a checkpoint (a signal,
  // a deadline). Data-parallel, the answers must agree (reduce them over the processes).
  virtual bool stop_requested() { return false; }
  virtual void step_done(const StepProgress&) {}
  // `done` of `total` rows of an evaluation (`what`: "evaluate train", "evaluate test").
  virtual void evaluating(const std::string& /*what*/, std::int64_t /*done*/,
                          std::int64_t /*total*/) {}
  // Between steps and evaluations (a progress display clears its line).
  virtual void pause() {}
  // An epoch's metrics, before its checkpoint.
  virtual void epoch_done(const EpochMetrics&) {}
  // After each checkpoint written (on every process; process 0 wrote it).
  virtual void saved(const TrainState&) {}
  // A non-finite loss or state under OnNonfinite::keep_going (every time).
  virtual void nonfinite(const std::string& /*what*/) {}
};

struct FitResult {
  enum class End {
    finished,        // every epoch trained
    max_steps,       // stopped at FitOptions::max_steps, saved
    stop_requested,  // FitObserver::stop_requested, saved
    nonfinite,       // stopped on a non-finite loss or state, not saved
  };
  End end = End::finished;
  // The step of the checkpoint on disk (-1: none written or resumed).
  std::int64_t saved_step = -1;
  std::int64_t steps_taken = 0;  // by this call
  // This call's epochs (a resumed run's earlier ones are the caller's).
  std::vector<EpochMetrics> epochs;
  // The test set's accuracy of the final parameters (finished runs only).
  float test_accuracy = 0;
  // What became non-finite, where (End::nonfinite).
  std::string nonfinite;
};

// Trains `state` (updated in place) with `step` on `train`, measuring on `test`; see above.
// Throws ValueError for options it cannot run (no rows, a batch_size or epochs below 1, or
// under data parallelism a batch with fewer rows than processes).
FitResult fit(ClassifierStep& step, TrainState& state, const Rows& train, const Rows& test,
              const FitOptions& options, FitObserver& observer);
FitResult fit(ClassifierStep& step, TrainState& state, const Rows& train, const Rows& test,
              const FitOptions& options);

// The rows of an epoch's smallest batch of `rows` rows: its last one when batch_size does not
// divide them (data-parallel, every process needs a row of it).
std::int64_t smallest_batch_rows(std::int64_t rows, std::int64_t batch_size);

// The path of the first leaf of `tree` holding a NaN or an infinity (float leaves), if any.
std::optional<std::string> first_nonfinite(const Tree& tree);

}  // namespace flaxpp::train
