// checkpoint_forward: an NNX MLP of num_layers Linear(features, features) built from one
// nnx.Rngs(seed), run through nnx.remat. The Flax NNX original:
//
//   class MLP(nnx.Module):
//     def __init__(self, features, num_layers, rngs):
//       self.layers = nnx.List([nnx.Linear(features, features, rngs=rngs) for _ in
//       range(num_layers)])
//     @nnx.remat
//     def __call__(self, x):
//       for layer in self.layers:
//         x = nnx.relu(layer(x))
//       return x
//
//   model = MLP(4, 3, rngs=nnx.Rngs(0))
//   print(model(jnp.array([[1.0, -0.5, 0.25, 2.0]])).reshape(-1))
#include <flaxpp/flaxpp.hpp>
#include <flaxpp/nn/nnx.hpp>
#include <iostream>

using namespace flaxpp;

struct MLP {
  nnx::List<nnx::Linear> layers;

  MLP(std::int64_t features, std::int64_t num_layers, nnx::Rngs& rngs) {
    for (std::int64_t i = 0; i < num_layers; ++i)
      layers.items.emplace_back(features, features, rngs);
  }
  Array operator()(const Array& x) const {
    static const auto forward =
        nnx::remat<nnx::List<nnx::Linear>>([](const nnx::List<nnx::Linear>& ls, Array h) {
          for (const nnx::Linear& layer : ls.items)
            h = relu(layer(h));
          return h;
        });
    return forward(layers, x);
  }
};

int main() try {
  nnx::Rngs rngs(0);
  const MLP model(4, 3, rngs);
  const Array x = Array::from_vector(std::vector<float>{1.0f, -0.5f, 0.25f, 2.0f}, Shape{1, 4});
  std::cout << reshape(model(x), {-1}) << "\n";
} catch (const Error& e) {  // e.g. FLAXPP_DEVICE=cuda where no GPU is visible
  std::cerr << e.what() << "\n";
  return 1;
}
