// flaxpp/train/train_state.hpp — TrainState (params, optimiser state, step) and a classifier
// train step that is traced once per input shape and then replayed (its forward and backward
// graphs are kept, and on a GPU recorded as a CUDA graph; only new shapes, e.g. a last partial
// batch, trace again).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "flaxpp/core/tree.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::dist {
class Communicator;
}  // namespace flaxpp::dist

namespace flaxpp::train {

struct TrainState {
  Tree params;     // the "params" collection
  Tree opt_state;  // the optimiser's state tree
  std::int64_t step = 0;

  // {"params": ..., "opt_state": ..., "step": i32[]}, the checkpoint layout.
  Tree to_tree() const;
  // Throws ValueError, saying what came, when a key is missing or "step" is not an int32
  // scalar >= 0. The optimiser state is checked by ClassifierStep::restore.
  static TrainState from_tree(const Tree& tree);
};

// Logits of a model for a batch: apply(params, x).
using ApplyFn = std::function<Array(const Tree& params, const Array& x)>;

// The apply of an MLP, lifted by remat<nn::MLP>(*policy) when a policy is given (Flax's
// nn.remat(MLP, policy=...)); its params are those nn::Model(mlp).init creates.
ApplyFn mlp_apply(const nn::MLP& mlp, const std::optional<PolicyPtr>& policy);

// One optimisation step of mean softmax cross-entropy with integer labels:
// value_and_grad, tx.update, apply_updates.
//
// On a GPU, once a shape has run eagerly, its forward and backward pass are recorded into a
// CUDA graph and replayed at every later step of that shape (the optimiser update follows as
// one fused kernel per dtype). The recording reads the parameters at their addresses, where
// the donating update keeps them: a step whose parameters moved (copies kept elsewhere) runs
// eagerly and records again. A shape whose recording fails runs eagerly, with one line on
// stderr saying why. A recording keeps its gradients and batch allocated between steps.
// FLAXPP_CUDA_GRAPHS=0 (or false, off) or set_graphs(false) turns recording off. A GPU step
// must not run while other threads queue work on the same GPU.
class ClassifierStep {
 public:
  ClassifierStep(ApplyFn apply, optim::GradientTransformation tx);

  TrainState init(const Tree& params) const { return {params, tx_.init(params), 0}; }
  // A state read back from a checkpoint tree (TrainState::to_tree's layout): from_tree, and the
  // optimiser state checked against this step's optimiser (optim::check_state), so that a
  // corrupt or foreign checkpoint fails here, naming the path, rather than in a step.
  TrainState restore(const Tree& checkpoint) const;
  // Updates `state` in place; returns the loss before the update. The step takes over the
  // buffers of state.params and state.opt_state (JAX's donation): copies of them you keep stay
  // valid but cost memory, and a step that fails once the update has begun (e.g. out of
  // memory; on the CPU the update runs during the backward pass) leaves both empty: restore
  // them from a checkpoint. Earlier failures leave them as they were.
  float operator()(TrainState& state, const Array& x, const Array& y);
  // Mean loss and accuracy of `params` on a data set (no update); with a communicator, of the
  // union of the processes' shards.
  std::pair<float, float> evaluate(const Tree& params, const Array& x, const Array& y) const;
  // How many distinct input shapes (and devices) were traced so far.
  std::size_t traces() const { return traced_.size(); }
  // Turning graphs off also frees the recordings made so far.
  void set_graphs(bool on);
  // Data parallelism (DDP's way): each process of `comm` calls the step with its shard of the
  // global batch; each gradient is averaged over the processes, weighted by their shards' rows,
  // as soon as it is final and before the update, so that every process applies the global
  // batch's update to identical parameters. The step returns the global batch's loss, and
  // evaluate the whole data set's metrics. nullptr (the default): one process.
  void set_communicator(dist::Communicator* comm) { comm_ = comm; }
  // Steps whose forward and backward pass were a replayed CUDA graph.
  std::int64_t replays() const { return replays_; }

 private:
  struct Traced;  // one input shape's compiled step and its recording
  // Records t's forward and backward pass for these inputs (on their GPU); where it cannot,
  // says why and leaves t eager.
  void record(Traced& t, std::span<const Array> params, const Array& x, const Array& y);

  ApplyFn apply_;
  optim::GradientTransformation tx_;
  std::map<std::string, std::shared_ptr<Traced>> traced_;  // by device and (params, x, y) avals
  bool graphs_ = true;
  bool leafwise_possible_ = true;  // false once tx_ could not update leaf by leaf
  std::int64_t replays_ = 0;
  dist::Communicator* comm_ = nullptr;
};

}  // namespace flaxpp::train
