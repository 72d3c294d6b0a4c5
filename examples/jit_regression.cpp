// jit_regression: a regression MLP trained with a loss of its own (optax.l2_loss) through jit:
// value_and_grad, the optax update and apply_updates are one function, traced once and
// replayed every step, with the parameters and optimiser state donated, as in JAX:
//
//   model = MLP(features=(32, 32, 1))            # Dense, relu, Dense, relu, Dense
//   tx = optax.sgd(0.05, momentum=0.9)
//   @functools.partial(jax.jit, donate_argnums=(0, 1))
//   def step(params, opt_state, x, y):
//     def loss_fn(p):
//       return optax.l2_loss(model.apply({"params": p}, x)[:, 0], y).mean()
//     loss, grads = jax.value_and_grad(loss_fn)(params)
//     updates, opt_state = tx.update(grads, opt_state, params)
//     return optax.apply_updates(params, updates), opt_state, loss
//
// The target is y = sin(2 x0) + x1^2 / 2 on 256 points of [-1, 1]^2. Prints the loss every 100
// steps; fails unless 400 steps bring it below a tenth of the first.
#include <flaxpp/flaxpp.hpp>
#include <flaxpp/nn/mlp.hpp>
#include <flaxpp/optim/losses.hpp>
#include <flaxpp/optim/transform.hpp>
#include <flaxpp/transforms/jit.hpp>
#include <cmath>
#include <iostream>

using namespace flaxpp;

int main() try {
  const std::vector<random::Key> keys = random::split(random::key(0));
  const Array x = random::uniform(keys[0], Shape{256, 2}, DType::f32, -1.0, 1.0);
  std::vector<float> targets;
  const std::vector<float> xs = x.to_vector<float>();
  for (std::size_t i = 0; i < 256; ++i)
    targets.push_back(std::sin(2.0f * xs[2 * i]) + 0.5f * xs[2 * i + 1] * xs[2 * i + 1]);
  const Array y = Array::from_vector(targets, Shape{256});

  const nn::MLP mlp{.features = {32, 32, 1}};
  const optim::GradientTransformation tx = optim::sgd(0.05, 0.9);
  const Jitted step = jit(
      [&](std::span<const Tree> a) {
        auto loss_fn = [&](const Tree& p) {
          const Array pred = reshape(nn::Model(mlp).apply(nn::Variables{{"params", p}}, a[2].array()), {-1});
          return mean(optim::l2_loss(pred, a[3].array()));
        };
        auto [loss, grads] = value_and_grad(loss_fn)(a[0]);
        auto [params, opt_state] = optim::apply_gradients(tx, std::move(grads), a[1], a[0]);
        return std::vector<Tree>{params, opt_state, Tree(loss)};
      },
      {.donate_argnums = {0, 1}});

  Tree params = nn::Model(mlp).init(keys[1], x)["params"];
  Tree opt_state = tx.init(params);
  float first = 0, loss = 0;
  for (int i = 0; i <= 400; ++i) {
    std::vector<Tree> out = step({std::move(params), std::move(opt_state), x, y});
    params = std::move(out[0]);
    opt_state = std::move(out[1]);
    loss = out[2].array().item<float>();
    if (i == 0) first = loss;
    if (i % 100 == 0) std::cout << "step " << i << ": loss " << loss << "\n";
  }
  std::cout << "traced " << step.num_traces() << " time(s)\n";
  if (!(loss < first / 10)) {
    std::cerr << "the loss did not fall below a tenth of the first (" << first << ")\n";
    return 1;
  }
  std::cout << "final loss " << loss << " < first / 10\n";
  return 0;
} catch (const Error& e) {
  std::cerr << "error: " << e.what() << "\n";
  return 1;
}
