// extend_custom_vjp: a composite op with a hand-written VJP (docs/EXTENDING.md), JAX's
// clip_gradient from the custom_vjp tutorial:
//
//   @jax.custom_vjp
//   def clip_gradient(x):
//     return x
//   def fwd(x):
//     return x, None
//   def bwd(_, g):
//     return (jnp.clip(g, -1.0, 1.0),)
//   clip_gradient.defvjp(fwd, bwd)
//   jax.grad(lambda x: jnp.sum(3.0 * clip_gradient(x)))(jnp.array([1.0, 2.0]))  # [1., 1.]
//
// The forward function is traced as one custom_vjp_call equation; differentiation uses the
// rule (remat policies decide on the call as a whole). Fails unless the gradient is clipped.
#include <flaxpp/flaxpp.hpp>
#include <flaxpp/transforms/custom_vjp.hpp>
#include <iostream>

#include "verdict.hpp"

using namespace flaxpp;

Array clip_gradient(const Array& x) {
  // Registered once, by name (the equation refers to it by name).
  static const CustomVjpRule rule("example.clip_gradient", [](const ir::VjpArgs& a) {
    const Array& g = a.cotangents[0];
    return std::vector<Array>{minimum(maximum(g, lax::full_like(g, -1.0)), lax::full_like(g, 1.0))};
  });
  const Array in[] = {x};
  return custom_vjp_call(rule, [](std::span<const Array> a) { return std::vector<Array>{a[0]}; },
                         in)[0];
}

int main() try {
  const Array x = Array::from_vector(std::vector<float>{1.0f, 2.0f}, Shape{2});
  const Array g = grad([](const Array& v) { return sum(3.0 * clip_gradient(v)); })(x);
  const Array plain = grad([](const Array& v) { return sum(3.0 * v); })(x);
  std::cout << "clipped gradient " << g << "\nplain gradient " << plain << "\n";
  return verdict(g.to_vector<float>() == std::vector<float>{1.0f, 1.0f},
                 "clipped to [-1, 1] as JAX's clip_gradient", "the gradient was not clipped");
} catch (const Error& e) {
  std::cerr << "error: " << e.what() << "\n";
  return 1;
}
