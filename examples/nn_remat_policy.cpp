// nn_remat_policy: a three-layer linen MLP whose class is wrapped by nn.remat with
// dots_with_no_batch_dims_saveable; its output, and what it saves for the backward pass.
//
//   class MLP(nn.Module):
//     features: int
//     @nn.compact
//     def __call__(self, x):
//       x = nn.relu(nn.Dense(self.features)(x))
//       x = nn.relu(nn.Dense(self.features)(x))
//       return nn.Dense(self.features)(x)
//
//   RematMLP = nn.remat(MLP, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
//   model = RematMLP(features=7)
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
    x = relu(s(nn::Dense{.features = features}, x));
    return s(nn::Dense{.features = features}, x);
  }
};

int main() try {
  const auto model =
      remat<MLP>(checkpoint_policies::dots_with_no_batch_dims_saveable())(MLP{.features = 7});
  const Array x = Array::from_vector(std::vector<float>{0.1f, -2.0f, 3.5f, 0.0f, 1.25f}, Shape{5});
  const nn::Variables variables = model.init(random::key(3), x);
  std::cout << reshape(model.apply(variables, x), {-1}) << "\n";

  // jax.ad_checkpoint.print_saved_residuals(lambda p: jnp.sum(model.apply({"params": p}, x) ** 2),
  // params)
  const Tree params = variables["params"];
  const ArrayFn loss = [&](std::span<const Array> leaves) {
    return std::vector{
        sum(square(model.apply(nn::Variables{{"params", params.with_leaves(leaves)}}, x)))};
  };
  std::vector<std::string> names;
  for (const auto& [path, leaf] : params.flatten()) {  // JAX's spelling: p['Dense_0']['bias']
    std::string name = "p['" + path + "']";
    for (std::size_t at = name.find('/'); at != std::string::npos; at = name.find('/'))
      name.replace(at, 1, "']['");
    names.push_back(name);
  }
  print_saved_residuals(loss, params.leaves(), names, std::cout);
} catch (const Error& e) {  // e.g. FLAXPP_DEVICE=cuda where no GPU is visible
  std::cerr << e.what() << "\n";
  return 1;
}
