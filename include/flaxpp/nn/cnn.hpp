// flaxpp/nn/cnn.hpp — the reference problems' convolutional network (refs-format.md,
// "Convolutions, pooling, normalisation and batch statistics"), line for line as its Flax
// definition: ConvBlock = Conv(features, 3x3, "SAME") -> relu -> avg_pool(2x2, stride 2), and CNN =
// ConvBlocks (remat'd by a policy, or plain), the mean over the spatial axes, a Dense head.
#pragma once

#include <optional>
#include <vector>

#include "flaxpp/nn/scope.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::nn {

struct ConvBlock {
  static constexpr const char* name = "ConvBlock";
  std::int64_t features = 0;
  // Flax's BatchNorm between the convolution and the relu; needs mutable batch statistics,
  // which flaxpp does not have yet: true is refused.
  bool use_batchnorm = false;

  // x: (B, H, W, C) -> (B, H / 2, W / 2, features).
  Array operator()(Scope& s, const Array& x) const;
};

// Children ConvBlock_i (CheckpointConvBlock_i with a policy: nn.remat(ConvBlock, policy,
// prevent_cse=False)), then Dense_0.
struct CNN {
  static constexpr const char* name = "CNN";
  std::vector<std::int64_t> features{};
  std::int64_t classes = 0;
  std::optional<PolicyPtr> policy{};  // none: plain blocks ("none")
  bool use_batchnorm = false;

  // x: (B, H, W, C) -> logits (B, classes).
  Array operator()(Scope& s, const Array& x) const;
};

}  // namespace flaxpp::nn
