// flaxpp/train/train_state.hpp — TrainState (params, optimiser state, step) and the classifier
// train step: value_and_grad of mean softmax cross-entropy, the optax update and
// apply_updates as one jitted function (transforms/jit.hpp), parameters and optimiser state
// donated. It is traced once per input signature (a last, partial batch traces again), its
// memory is planned (each leaf updated as soon as its gradient is final on the CPU), and on a
// GPU it is replayed as one CUDA graph.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "flaxpp/core/tree.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/transforms/jit.hpp"

namespace flaxpp::dist {
class Communicator;
}  // namespace flaxpp::dist

namespace flaxpp::train {

struct TrainState {
  Tree params;     // the "params" collection
  Tree opt_state;  // the optimiser's state tree
  std::int64_t step = 0;
  Tree batch_stats{};  // the "batch_stats" collection; empty for a model without one

  // {"params": ..., "opt_state": ..., "step": i32[]}, and "batch_stats" when there are any:
  // the checkpoint layout.
  Tree to_tree() const;
  // Throws ValueError, saying what came, when a key is missing or "step" is not an int32
  // scalar >= 0. The optimiser state is checked by ClassifierStep::restore.
  static TrainState from_tree(const Tree& tree);
};

// Logits of a model for a batch: apply(params, x).
using ApplyFn = std::function<Array(const Tree& params, const Array& x)>;
// How the model runs: training or evaluation, and the rng streams of a training step: a
// "dropout" key (traced inside the jitted step) when the step has one (set_dropout_key),
// none otherwise and when evaluating.
struct ApplyMode {
  bool train = false;
  nn::RngStreams rngs{};
};

// Logits of a model with batch statistics, and the statistics after the batch:
// apply(params, batch_stats, x, mode). Training (mode.train) runs on the batch's statistics
// and returns the updated running averages (Flax's apply with mutable=["batch_stats"]), with
// mode.rngs as apply's rngs; evaluation runs on the running averages (the returned statistics
// are ignored).
using StatefulApplyFn = std::function<std::pair<Array, Tree>(
    const Tree& params, const Tree& batch_stats, const Array& x, const ApplyMode& mode)>;

// One optimisation step of mean softmax cross-entropy with integer labels: value_and_grad,
// tx.update, apply_updates, jitted.
//
// The step takes over the buffers of state.params and state.opt_state (JAX's donation) and
// writes the new values into them. Leaves you keep copies of are copied first, so your copies
// stay valid but cost memory. A step that fails once it has begun (e.g. out of memory) leaves
// both empty: restore them from a checkpoint; earlier failures (a wrong shape) leave them as
// they were. On a GPU, FLAXPP_CUDA_GRAPHS=0 (or false, off) or set_graphs(false) turns the
// CUDA-graph replay off; a GPU step must not run while other threads queue work on that GPU.
class ClassifierStep {
 public:
  ClassifierStep(ApplyFn apply, optim::GradientTransformation tx);
  // A model with batch statistics: the step takes the updated statistics as the loss's aux and
  // keeps them in TrainState::batch_stats. Data-parallel, the model averages them over the
  // processes itself (BatchNorm's axis_name), or each replica keeps its own.
  ClassifierStep(StatefulApplyFn apply, optim::GradientTransformation tx);

  TrainState init(const Tree& params, const Tree& batch_stats = {}) const {
    return {params, tx_.init(params), 0, batch_stats};
  }
  // A state read back from a checkpoint tree (TrainState::to_tree's layout): from_tree, and the
  // optimiser state checked against this step's optimiser (optim::check_state), so that a
  // corrupt or foreign checkpoint fails here, naming the path, rather than in a step.
  TrainState restore(const Tree& checkpoint) const;
  // Updates `state` in place; returns the loss before the update.
  float operator()(TrainState& state, const Array& x, const Array& y);
  // The compiled step for `state` and a batch like (x, y), traced now if its signature is new:
  // its graph and memory_analysis().
  CompiledStep lower(const TrainState& state, const Array& x, const Array& y) const;
  // Mean loss and accuracy of `params` on a data set (no update); with a communicator, of the
  // union of the processes' shards. `batch_rows` > 0 evaluates that many rows at a time, so
  // that memory holds one batch's activations, not the data set's (the batches' means,
  // weighted by their rows, summed in double: another rounding than one pass).
  std::pair<float, float> evaluate(const Tree& params, const Array& x, const Array& y,
                                   std::int64_t batch_rows = 0) const;
  // The same for a model with batch statistics, on the state's running averages.
  std::pair<float, float> evaluate(const TrainState& state, const Array& x, const Array& y,
                                   std::int64_t batch_rows = 0) const;
  // The same over `rows` rows that are gathered a batch at a time, rows [begin, end) by
  // `batch(begin, end)` as (x, y): data read from a file on demand, whose whole never needs
  // to be in memory. batch_rows >= 1.
  using BatchFn = std::function<std::pair<Array, Array>(std::int64_t begin, std::int64_t end)>;
  std::pair<float, float> evaluate(const Tree& params, std::int64_t rows, std::int64_t batch_rows,
                                   const BatchFn& batch) const;
  std::pair<float, float> evaluate(const TrainState& state, std::int64_t rows,
                                   std::int64_t batch_rows, const BatchFn& batch) const;
  // How many distinct input signatures were traced so far.
  std::size_t traces() const { return step_.num_traces(); }
  // Turning graphs off also frees the recordings made so far.
  void set_graphs(bool on) { step_.set_cuda_graphs(on); }
  // Data parallelism (DDP's way) over `comm`, which must be dist::world() (the all_reduce
  // primitive reduces over the job's processes): each process calls the step with its shard
  // of the global batch; inside the step each gradient is averaged over the processes,
  // weighted by their shards' rows, before the update, so that every process applies the
  // global batch's update to identical parameters. The step returns the global batch's loss,
  // and evaluate the whole data set's metrics. nullptr (the default): one process.
  void set_communicator(dist::Communicator* comm);
  dist::Communicator* communicator() const { return comm_; }
  // Dropout: each step draws from fold_in(key, state.step) — data-parallel, folded once more
  // with the process's rank, so that replicas drop different units — given to the model as its
  // "dropout" rng stream. The key enters the jitted step as an argument: new masks every step
  // from one trace, and a resumed run draws the masks the uninterrupted one would have.
  // Without a key (the default) the model is applied without rngs, and a module that drops
  // says it needs a "dropout" key.
  void set_dropout_key(const random::Key& key);
  // Remat by budget (JitOptions::memory_budget): every signature's planned peak at most
  // `bytes`, the model's checkpoint regions choosing what to keep (lower(...).remat_plan() says
  // what); 0: none. The step is traced anew.
  void set_memory_budget(std::int64_t bytes);
  // Steps that replayed a CUDA graph.
  std::int64_t replays() const { return step_.replays(); }

 private:
  Jitted make_step() const;
  std::vector<Tree> arguments(const TrainState& state, const Array& x, const Array& y) const;

  StatefulApplyFn apply_;
  optim::GradientTransformation tx_;
  dist::Communicator* comm_ = nullptr;
  std::optional<random::Key> dropout_key_;
  std::int64_t memory_budget_ = 0;
  Jitted step_;
};

}  // namespace flaxpp::train
