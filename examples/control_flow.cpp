// control_flow: lax.cond, lax.fori_loop and lax.while_loop, differentiated and
// checkpointed (docs/EXTENDING.md, "A higher-order primitive", shows how cond is built):
//
//   def loss(w, x):
//     y = lax.cond(jnp.sum(x) > 0, lambda w, x: jnp.tanh(x @ w), lambda w, x: jnp.sin(x) * w[0],
//                  w, x)
//     return jnp.sum(y ** 2)
//   h = jax.checkpoint(loss, policy=jax.checkpoint_policies.dots_saveable)
//   jax.grad(h, argnums=(0, 1))(w, x)             # the same as jax.grad(loss, ...)
//   jax.ad_checkpoint.print_saved_residuals(h, w, x)
//   # f32[3,3] from the argument w / f32[2,3] from the argument x / f32[2,3] output of cond
//
//   sqrt = lambda a: lax.fori_loop(0, 6, lambda i, y: 0.5 * (y + a / y), a)   # Newton
//   jax.grad(sqrt)(2.0)                            # 1 / (2 sqrt 2) = 0.35355...
//   lax.while_loop(lambda c: c[0] > 1, lambda c: (c[0] / 2, c[1] + 1), (100.0, 0))  # (0.78125, 7)
#include <cmath>
#include <flaxpp/flaxpp.hpp>
#include <iostream>

#include "verdict.hpp"

using namespace flaxpp;

int main() try {
  const ArrayFn loss = [](std::span<const Array> a) {
    const lax::Branch dense = [](std::span<const Array> o) {
      return std::vector<Array>{tanh(matmul(o[1], o[0]))};
    };
    const lax::Branch wave = [](std::span<const Array> o) {
      return std::vector<Array>{sin(o[1]) * lax::take(o[0], Array::scalar(std::int32_t{0}))};
    };
    const Array positive = greater(sum(a[1]), Array::scalar(0.0f));
    return std::vector<Array>{sum(square(lax::cond(positive, dense, wave, a)[0]))};
  };
  const ArrayFn h = checkpoint(loss, checkpoint_policies::dots_saveable());
  const Array w = Array::from_vector(std::vector<float>{0.5f, 0, 0.1f, 0, 0.5f, 0, -0.2f, 0, 0.5f},
                                     Shape{3, 3});
  const Array x = Array::from_vector(std::vector<float>{-2, -1, 0, 1, 2, 3}, Shape{2, 3});
  const std::vector<Array> args{w, x}, one{Array::scalar(1.0f)};
  const std::vector<Array> g = vjp(h, args).backward(one), plain = vjp(loss, args).backward(one);
  std::cout << "dh/dw = " << g[0] << "\ndh/dx = " << g[1] << "\n";
  const std::string names[] = {"w", "x"};
  print_saved_residuals(h, args, names, std::cout);

  // Newton's method for sqrt(a) as a fori_loop with static bounds: a scan, so differentiable.
  const auto newton_sqrt = [](const Array& a) {
    const lax::ForiBody step = [&a](const Array&, std::span<const Array> y) {
      return std::vector<Array>{Array::scalar(0.5) * (y[0] + a / y[0])};
    };
    const std::vector<Array> init{a};
    return lax::fori_loop(0, 6, step, init)[0];
  };
  const Array two = Array::scalar(2.0);
  const double root = newton_sqrt(two).item<double>();
  const double slope = grad(newton_sqrt)(two).item<double>();
  std::cout << "sqrt(2) = " << root << ", its derivative " << slope << "\n";

  // A while_loop: halve until at most 1, counting the steps (not reverse-differentiable).
  const std::vector<Array> init{Array::scalar(100.0), Array::scalar(std::int32_t{0})};
  const std::vector<Array> halved = lax::while_loop(
      [](std::span<const Array> c) { return greater(c[0], Array::scalar(1.0)); },
      [](std::span<const Array> c) {
        return std::vector<Array>{c[0] / Array::scalar(2.0), c[1] + Array::scalar(std::int32_t{1})};
      },
      init);
  std::cout << "halved to " << halved[0].item<double>() << " in " << halved[1].item<std::int32_t>()
            << " steps\n";

  bool same = true;
  for (std::size_t i = 0; i < g.size(); ++i)
    same = same && g[i].to_vector<float>() == plain[i].to_vector<float>();
  return verdict(same && std::abs(root - std::sqrt(2.0)) < 1e-12 &&
                     std::abs(slope - 0.5 / std::sqrt(2.0)) < 1e-9 &&
                     halved[0].item<double>() == 0.78125 && halved[1].item<std::int32_t>() == 7,
                 "cond, fori_loop and while_loop agree with JAX",
                 "control flow disagrees with JAX's values");
} catch (const Error& e) {  // e.g. FLAXPP_DEVICE=cuda where no GPU is visible
  std::cerr << e.what() << "\n";
  return 1;
}
