// extend_module: a module of your own (docs/EXTENDING.md). ScaledDense has a child Dense, a
// parameter of its own and a variable of another collection; Net nests two of them. Flax's
// linen equivalent:
//
//   class ScaledDense(nn.Module):
//     features: int
//     @nn.compact
//     def __call__(self, x):
//       y = nn.Dense(self.features)(x)
//       scale = self.param("scale", nn.initializers.ones, (self.features,))
//       shift = self.variable("constants", "shift", lambda: jnp.full((self.features,), 0.5))
//       return y * scale + shift.value
//
//   class Net(nn.Module):
//     @nn.compact
//     def __call__(self, x):
//       return ScaledDense(2)(nn.relu(ScaledDense(8)(x)))
//
// Prints the variables' paths (Flax's, auto-named per class), the output and the gradients'
// paths; fails unless the paths are Flax's.
#include <flaxpp/flaxpp.hpp>
#include <iostream>

#include "verdict.hpp"

using namespace flaxpp;

struct ScaledDense {
  static constexpr const char* name = "ScaledDense";  // instances: ScaledDense_0, _1, ...
  std::int64_t features = 0;

  Array operator()(nn::Scope& s, const Array& x) const {
    const Array y = s(nn::Dense{.features = features}, x);  // child Dense_0
    const Array scale = s.param("scale", initializers::ones(), Shape{features});
    const Array shift = s.variable("constants", "shift", [&] {
      return Array::full(Shape{features}, 0.5, DType::f32);
    });
    return y * scale + shift;
  }
};

struct Net {
  static constexpr const char* name = "Net";
  Array operator()(nn::Scope& s, const Array& x) const {
    return s(ScaledDense{.features = 2}, relu(s(ScaledDense{.features = 8}, x)));
  }
};

int main() try {
  const nn::Model model(Net{});
  const Array x = random::normal(random::key(1), Shape{4, 3});
  const nn::Variables variables = model.init(random::key(0), x);
  std::vector<std::string> paths;
  for (const auto& [path, leaf] : variables.flatten()) {
    std::cout << path << " " << leaf.aval() << "\n";
    paths.push_back(path);
  }
  const std::vector<std::string> flax = {
      "constants/ScaledDense_0/shift",         "constants/ScaledDense_1/shift",
      "params/ScaledDense_0/Dense_0/bias",     "params/ScaledDense_0/Dense_0/kernel",
      "params/ScaledDense_0/scale",            "params/ScaledDense_1/Dense_0/bias",
      "params/ScaledDense_1/Dense_0/kernel",   "params/ScaledDense_1/scale"};
  std::cout << "output " << model.apply(variables, x) << "\n";

  // Gradients with respect to the params collection only; the constants ride along.
  const Tree constants = variables["constants"];
  const Tree grads = grad([&](const Tree& params) {
    return sum(square(model.apply(nn::Variables{{"params", params}, {"constants", constants}}, x)));
  })(variables["params"]);
  std::cout << "gradients for " << grads.flatten().size() << " parameters\n";
  return verdict(paths == flax, "paths as Flax names them", "the variables' paths are not Flax's");
} catch (const Error& e) {
  std::cerr << "error: " << e.what() << "\n";
  return 1;
}
