// flaxpp/nn/pooling.hpp — Flax's pooling functions (flax/linen/pooling.py): windows over the
// spatial axes between the batch axes and the features, reduced by jax.lax.reduce_window.
#pragma once

#include <cstdint>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax_convolution.hpp"

namespace flaxpp::nn {

// x: (batch..., spatial..., features), one spatial axis per window_shape entry (no batch axis:
// one is added and removed). strides all 1 where empty; padding "VALID" (Flax's default),
// "SAME" or one (low, high) pair per spatial axis.
struct PoolOptions {
  std::vector<std::int64_t> strides{};
  lax::PaddingSpec padding = std::string("VALID");
};

// nn.max_pool: the largest element of each window (padding counts as -inf).
Array max_pool(const Array& x, const std::vector<std::int64_t>& window_shape,
               const PoolOptions& options = {});
// nn.avg_pool with Flax's count_include_pad=True: each window's sum divided by its size,
// padding counting as zeros.
Array avg_pool(const Array& x, const std::vector<std::int64_t>& window_shape,
               const PoolOptions& options = {});

}  // namespace flaxpp::nn
