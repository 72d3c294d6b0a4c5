// The remat workload the memory tests share: a stack of dense + bias + relu layers, each in its
// own checkpoint under `policy` (none: plain), whose loss is sum(h^2). Parameters are passed as
// (w0, b0, w1, b1, ...).
#pragma once

#include <cstdint>
#include <vector>

#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::testing {

inline ArrayFn remat_stack_loss(Array x, std::int64_t layers, PolicyPtr policy) {
  const ArrayFn layer = [](std::span<const Array> v) {
    return std::vector<Array>{relu(matmul(v[0], v[1]) + v[2])};
  };
  return [x = std::move(x), layers, policy = std::move(policy), layer](std::span<const Array> p) {
    Array h = x;
    for (std::int64_t l = 0; l < layers; ++l) {
      const std::vector<Array> args{h, p[2 * l], p[2 * l + 1]};
      h = policy ? checkpoint(layer, policy)(args)[0] : layer(args)[0];
    }
    return std::vector<Array>{sum(square(h))};
  };
}

}  // namespace flaxpp::testing
