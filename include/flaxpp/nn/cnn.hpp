// flaxpp/nn/cnn.hpp — the reference problems' convolutional network (refs-format.md,
// "Convolutions, pooling, normalisation and batch statistics"), line for line as its Flax
// definition: ConvBlock = Conv(features, 3x3, "SAME") -> BatchNorm (momentum 0.9, optional) ->
// relu -> avg_pool(2x2, stride 2), and CNN = ConvBlocks (remat'd by a policy, or plain), the
// mean over the spatial axes, a Dense head. `train` picks the batch's statistics (updating the
// running averages: apply_mutable with "batch_stats") over the running averages. A `dropout`
// rate (not in the reference problems, which leave it 0) drops features before the head while
// training, nn.Dropout(dropout, deterministic=not train) as Dropout_0, with keys from the
// "dropout" rng stream.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "flaxpp/nn/scope.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::nn {

struct ConvBlock {
  static constexpr const char* name = "ConvBlock";
  std::int64_t features = 0;
  bool use_batchnorm = false;
  std::optional<std::string> axis_name{};  // BatchNorm's (data-parallel statistics)

  // x: (B, H, W, C) -> (B, H / 2, W / 2, features).
  Array operator()(Scope& s, const Array& x, bool train = false) const;
};

// Children ConvBlock_i (CheckpointConvBlock_i with a policy: nn.remat(ConvBlock, policy,
// prevent_cse=False)), then Dense_0.
struct CNN {
  static constexpr const char* name = "CNN";
  std::vector<std::int64_t> features{};
  std::int64_t classes = 0;
  PolicyPtr policy = checkpoint_policies::none();  // none(): plain blocks
  bool use_batchnorm = false;
  std::optional<std::string> axis_name{};  // the blocks' BatchNorm's (data-parallel statistics)
  double dropout = 0.0;                    // rate before the head; 0: no Dropout module

  // x: (B, H, W, C) -> logits (B, classes).
  Array operator()(Scope& s, const Array& x, bool train = false) const;
};

}  // namespace flaxpp::nn
