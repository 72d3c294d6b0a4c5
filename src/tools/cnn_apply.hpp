// tools/cnn_apply.hpp (private to the tools library) — the apply of nn::CNN as a
// ClassifierStep takes it: the model of `flaxpp train`'s CNN and of the cnn_train reference
// problem.
#pragma once

#include <functional>

#include "flaxpp/nn/cnn.hpp"
#include "flaxpp/train/train_state.hpp"

namespace flaxpp::train {

// apply(params, batch_stats, x, mode): with no statistics a plain apply, with them Flax's
// apply(..., mutable=["batch_stats"]); mode.rngs (the step's dropout key) as apply's rngs.
// `images` (when given) turns a batch into the CNN's (B, H, W, C) images first.
StatefulApplyFn cnn_apply(const nn::CNN& cnn, std::function<Array(const Array&)> images = {});

}  // namespace flaxpp::train
