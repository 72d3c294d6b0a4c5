// The transformer stack's Adam train step the memory tests share: loss mean(stack(x)^2), its
// parameters and optimiser state donated; arguments (params, optimiser state, x).
#pragma once

#include <vector>

#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/jit.hpp"

namespace flaxpp::testing {

struct StackTrainStep {
  Jitted step;
  std::vector<Tree> args;
};

inline StackTrainStep stack_train_step(const nn::TransformerStack& config, const Array& x,
                                       std::int64_t memory_budget = 0) {
  const nn::Model stack(config);
  const optim::GradientTransformation tx = optim::adam(1e-3);
  Jitted step = jit(
      [stack, tx](std::span<const Tree> a) {
        auto [loss, grads] = value_and_grad([&](const Tree& params) {
          return mean(square(stack.apply(nn::Variables{{"params", params}}, a[2].array())));
        })(a[0]);
        auto [params, state] = optim::apply_gradients(tx, std::move(grads), a[1], a[0]);
        return std::vector<Tree>{params, state, Tree(loss)};
      },
      {.donate_argnums = {0, 1}, .memory_budget = memory_budget});
  const Tree params = stack.init(random::key(0), x)["params"];
  return {std::move(step), {params, tx.init(params), Tree(x)}};
}

}  // namespace flaxpp::testing
