// flaxpp/optim/transform.hpp — optax's gradient transformations: each an (init, update) pair
// over trees, with its state a Tree too ({"count": i32[], "mu": <tree>, ...}; a chain's state
// is {"0": ..., "1": ...}). Formulas and defaults follow optax 0.2.8 to the operation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "flaxpp/core/tree.hpp"
#include "flaxpp/optim/schedule.hpp"
#include "flaxpp/optim/update_builder.hpp"

namespace flaxpp::optim {

struct GradientTransformation {
  std::function<Tree(const Tree& params)> init;
  // (updates, state, params) -> (new updates, new state)
  std::function<std::pair<Tree, Tree>(const Tree& updates, const Tree& state, const Tree& params)>
      update;
  // The same update as per-element code (update_builder.hpp), which every built-in
  // transformation has (its `update` runs it); empty for a custom transformation given by
  // init and update alone. A chain of transformations that all have it runs as one fused pass
  // per dtype, and apply_gradients adds the parameter update to the same pass.
  Emitter emit = {};
};

// A transformation from its init and emitter; its update runs the emitted code.
GradientTransformation from_emitter(std::function<Tree(const Tree& params)> init, Emitter emit);

GradientTransformation chain(std::vector<GradientTransformation> transforms);
GradientTransformation identity();
// updates * step_size.
GradientTransformation scale(double step_size);
// updates * (-learning_rate) (or * schedule(count), negated).
GradientTransformation scale_by_learning_rate(const LearningRate& learning_rate,
                                              bool flip_sign = true);
// Momentum: t = g + decay * t; updates = t (or g + decay * t with nesterov).
GradientTransformation trace(double decay, bool nesterov = false);
// optax's keyword arguments as option structs: optim::adam(1e-3, {.b2 = 0.99}).
struct AdamOptions {
  double b1 = 0.9, b2 = 0.999, eps = 1e-8, eps_root = 0.0;
  bool nesterov = false;
};
struct AdamWOptions {
  double b1 = 0.9, b2 = 0.999, eps = 1e-8, eps_root = 0.0, weight_decay = 1e-4;
  bool nesterov = false;
};
struct RmsOptions {
  double decay = 0.9, eps = 1e-8, initial_scale = 0.0;
  bool eps_in_sqrt = true, bias_correction = false;
};
struct RmspropOptions {
  double decay = 0.9, eps = 1e-8, initial_scale = 0.0;
  bool eps_in_sqrt = true, centered = false;
  std::optional<double> momentum{};
  bool nesterov = false, bias_correction = false;
};

GradientTransformation scale_by_adam(const AdamOptions& options = {});
GradientTransformation add_decayed_weights(double weight_decay);
GradientTransformation scale_by_rms(const RmsOptions& options = {});
// Centered RMS (rmsprop's centered=true): scales by rsqrt(E[g^2] - E[g]^2 + eps).
GradientTransformation scale_by_stddev(const RmsOptions& options = {});
// Rescales all updates together when their global norm exceeds max_norm.
GradientTransformation clip_by_global_norm(double max_norm);

// The optimisers (optax.sgd, adam, adamw, rmsprop) with optax's defaults.
GradientTransformation sgd(const LearningRate& learning_rate,
                           std::optional<double> momentum = std::nullopt, bool nesterov = false);
GradientTransformation adam(const LearningRate& learning_rate, const AdamOptions& options = {});
GradientTransformation adamw(const LearningRate& learning_rate, const AdamWOptions& options = {});
GradientTransformation rmsprop(const LearningRate& learning_rate,
                               const RmspropOptions& options = {});

// Checks a state restored from outside (a checkpoint) against what tx.init(params) makes: the
// same tree paths, every leaf of the same shape and dtype. Throws ValueError naming the first
// difference by its path under `name` ("opt_state/0/count"), what was expected and what came.
void check_state(const GradientTransformation& tx, const Tree& params, const Tree& state,
                 const std::string& name = "opt_state");

// optax.global_norm: sqrt of the sum of squares of every leaf.
Array global_norm(const Tree& updates);
// optax.apply_updates: params + updates, in the params' dtypes.
Tree apply_updates(const Tree& params, const Tree& updates);
// tx.update then apply_updates: (new params, new state), as Flax's TrainState.apply_gradients.
// With an emitter, one fused pass per dtype computes the new parameters and state together,
// in place of the gradients, parameters and state leaves that the caller moved in and holds
// nowhere else (JAX's donation); copies the caller keeps are never written. The fused pass
// needs each leaf's gradient and state in the parameter's dtype (a clear error otherwise;
// apply_updates alone casts the sum to the parameter's dtype).
std::pair<Tree, Tree> apply_gradients(const GradientTransformation& tx, Tree grads, Tree state,
                                      Tree params);

}  // namespace flaxpp::optim
