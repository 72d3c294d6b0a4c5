// checkpoint_dot_policy: jax.checkpoint with dots_with_no_batch_dims_saveable on
// f(w1, w2, x) = sum((relu(x @ w1) @ w2) ** 2): its value, its gradients, and what it saves.
//
//   f = lambda w1, w2, x: jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)
//   h = jax.checkpoint(f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
//   w1 = jnp.eye(3) * 0.5; w2 = -jnp.ones((3, 3)) / 3; x = jnp.arange(6.0).reshape(2, 3) - 2
//   print(h(w1, w2, x), jax.grad(h, argnums=(0, 1, 2))(w1, w2, x))
//   jax.ad_checkpoint.print_saved_residuals(h, w1, w2, x)
#include <flaxpp/flaxpp.hpp>
#include <iostream>

using namespace flaxpp;

int main() try {
  const ArrayFn f = [](std::span<const Array> a) {
    return std::vector{sum(power(matmul(relu(matmul(a[2], a[0])), a[1]), 2))};
  };
  const ArrayFn h = checkpoint(f, checkpoint_policies::dots_with_no_batch_dims_saveable());
  const Array w1 =
      Array::from_vector(std::vector<float>{0.5f, 0, 0, 0, 0.5f, 0, 0, 0, 0.5f}, Shape{3, 3});
  const Array w2 = Array::full(Shape{3, 3}, -1.0 / 3.0, DType::f32);
  const Array x = Array::from_vector(std::vector<float>{-2, -1, 0, 1, 2, 3}, Shape{2, 3});
  const std::vector<Array> args{w1, w2, x};

  const VjpResult r = vjp(h, args);
  std::cout << "h = " << r.outputs[0] << "\n";
  const std::vector<Array> one{Array::scalar(1.0f)};
  const std::vector<Array> g = r.backward(one);
  std::cout << "dh/dw1 = " << g[0] << "\ndh/dw2 = " << g[1] << "\ndh/dx = " << g[2] << "\n";
  const std::string names[] = {"w1", "w2", "x"};
  print_saved_residuals(h, args, names, std::cout);
} catch (const Error& e) {  // e.g. FLAXPP_DEVICE=cuda where no GPU is visible
  std::cerr << e.what() << "\n";
  return 1;
}
