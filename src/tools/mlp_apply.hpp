// tools/mlp_apply.hpp (private to the tools library) — the apply of an MLP classifier as a
// ClassifierStep takes it: the model of `flaxpp train`, `flaxpp bench` and the train_mlp
// reference problem.
#pragma once

#include <optional>

#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/train/train_state.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::train {

// apply(params, x) of an MLP lifted by remat<nn::MLP>(policy) (Flax's nn.remat(MLP,
// policy=...); the MLP itself under checkpoint_policies::none()); its params are those
// nn::Model(mlp).init creates.
ApplyFn mlp_apply(const nn::MLP& mlp, const PolicyPtr& policy);

}  // namespace flaxpp::train
