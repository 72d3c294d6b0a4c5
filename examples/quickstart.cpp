// quickstart: initialise parameters as JAX would, run a checkpointed layer, and take
// gradients — the README's first example, built and run by the test suite.
#include <flaxpp/flaxpp.hpp>
#include <iostream>

using namespace flaxpp;

int main() try {
  std::vector<random::Key> ks = random::split(random::key(0));  // == jax.random.split(key(0))
  Tree params{{"w", initializers::lecun_normal()(ks[0], Shape{3, 4}, DType::f32)},
              {"b", zeros(Shape{4})}};
  Array x = random::normal(ks[1], Shape{8, 3});

  // Each layer in its own checkpoint; the policy decides what the backward pass may reuse.
  auto layer = checkpoint(
      [](const Array& in, const Array& w, const Array& b) { return relu(matmul(in, w) + b); },
      checkpoint_policies::dots_with_no_batch_dims_saveable());
  auto [loss, grads] = value_and_grad([&](const Tree& p) {
    return sum(square(layer(x, p["w"].array(), p["b"].array())));
  })(params);  // grads has params' paths

  std::cout << "loss " << loss << "\n";
  for (const auto& [path, g] : grads.flatten())
    std::cout << "grad " << path << " " << g << "\n";
  std::cout << "peak bytes " << backend(default_device()).memory_stats().peak_bytes << "\n";
  return 0;
} catch (const Error& e) {  // e.g. FLAXPP_DEVICE=cuda where no GPU is visible
  std::cerr << e.what() << "\n";
  return 1;
}
