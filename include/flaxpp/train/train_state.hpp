// flaxpp/train/train_state.hpp — TrainState (params, optimiser state, step) and a classifier
// train step that is traced once per input shape and then replayed (its forward and backward
// graphs are kept; only new shapes, e.g. a last partial batch, trace again).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "flaxpp/core/tree.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::train {

struct TrainState {
  Tree params;     // the "params" collection
  Tree opt_state;  // the optimiser's state tree
  std::int64_t step = 0;

  // {"params": ..., "opt_state": ..., "step": i32[]}, the checkpoint layout.
  Tree to_tree() const;
  static TrainState from_tree(const Tree& tree);
};

// Logits of a model for a batch: apply(params, x).
using ApplyFn = std::function<Array(const Tree& params, const Array& x)>;

// The apply of an MLP, lifted by remat<nn::MLP>(*policy) when a policy is given (Flax's
// nn.remat(MLP, policy=...)); its params are those nn::Model(mlp).init creates.
ApplyFn mlp_apply(const nn::MLP& mlp, const std::optional<PolicyPtr>& policy);

// One optimisation step of mean softmax cross-entropy with integer labels:
// value_and_grad, tx.update, apply_updates.
class ClassifierStep {
 public:
  ClassifierStep(ApplyFn apply, optim::GradientTransformation tx)
      : apply_(std::move(apply)), tx_(std::move(tx)) {}

  TrainState init(const Tree& params) const { return {params, tx_.init(params), 0}; }
  // Updates `state` in place; returns the loss before the update. The step takes over the
  // buffers of state.params and state.opt_state (JAX's donation): copies of them you keep stay
  // valid but cost memory, and a step that fails after the forward pass (e.g. out of memory)
  // leaves both empty: restore them from a checkpoint.
  float operator()(TrainState& state, const Array& x, const Array& y);
  // Mean loss and accuracy of `params` on a data set (no update).
  std::pair<float, float> evaluate(const Tree& params, const Array& x, const Array& y) const;
  // How many distinct input shapes were traced so far.
  std::size_t traces() const { return compiled_.size(); }

 private:
  ApplyFn apply_;
  optim::GradientTransformation tx_;
  std::map<std::string, CompiledVjp> compiled_;  // by the avals of (params, x, y)
  Array seed_;                                   // 1 of the loss's dtype, on its device
};

}  // namespace flaxpp::train
