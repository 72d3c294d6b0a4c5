// flaxpp/nn/mlp.hpp — MLP: Dense layers with an activation between them (none after the last
// unless activate_final), children Dense_0, Dense_1, ... as a Flax compact module names them.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "flaxpp/nn/dense.hpp"

namespace flaxpp::nn {

struct MLP {
  static constexpr const char* name = "MLP";
  std::vector<std::int64_t> features{};
  std::function<Array(const Array&)> activation{};  // empty: relu
  bool activate_final = false;
  std::optional<DType> dtype{};  // each Dense's computation dtype (e.g. bf16 on a GPU)

  Array operator()(Scope& s, const Array& x) const;
};

}  // namespace flaxpp::nn
