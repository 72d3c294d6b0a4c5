// nn_checkpoint_forward: a linen MLP (Dense -> relu -> Dense) whose class is wrapped by
// nn.checkpoint, initialised from PRNGKey(3) and applied. The Flax original:
//
//   class MLP(nn.Module):
//     features: int
//     @nn.compact
//     def __call__(self, x):
//       x = nn.relu(nn.Dense(self.features)(x))
//       return nn.Dense(self.features)(x)
//
//   model = nn.checkpoint(MLP)(features=7)
//   x = jnp.array([0.1, -2.0, 3.5, 0.0, 1.25])
//   variables = model.init(jax.random.PRNGKey(3), x)
//   print(model.apply(variables, x).reshape(-1))
#include <flaxpp/flaxpp.hpp>
#include <flaxpp/nn/dense.hpp>
#include <flaxpp/nn/remat.hpp>
#include <iostream>

using namespace flaxpp;

struct MLP {
  static constexpr const char* name = "MLP";
  std::int64_t features = 0;
  Array operator()(nn::Scope& s, Array x) const {
    x = relu(s(nn::Dense{.features = features}, x));
    return s(nn::Dense{.features = features}, x);
  }
};

int main() try {
  const auto model = checkpoint<MLP>()(MLP{.features = 7});
  const Array x = Array::from_vector(std::vector<float>{0.1f, -2.0f, 3.5f, 0.0f, 1.25f}, Shape{5});
  const nn::Variables variables = model.init(random::key(3), x);
  std::cout << reshape(model.apply(variables, x), {-1}) << "\n";
} catch (const Error& e) {  // e.g. FLAXPP_DEVICE=cuda where no GPU is visible
  std::cerr << e.what() << "\n";
  return 1;
}
