// extend_policy: a remat policy of your own (docs/EXTENDING.md, "A remat policy"): save the
// products whose right operand is at least 16 columns wide, recompute everything else.
//
//   def save_wide_dots(prim, *avals, **params):
//     return prim is lax.dot_general_p and avals[1].shape[-1] >= 16
//   f = lambda w1, w2, x: jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)
//   h = jax.checkpoint(f, policy=save_wide_dots)
//   w1 = jnp.ones((4, 16)) / 4; w2 = jnp.ones((16, 2)) / 16; x = jnp.arange(12.0).reshape(3, 4) - 5
//   print_saved_residuals(h, w1, w2, x)
//   # f32[4,16] from the argument w1 / f32[16,2] from the argument w2 / f32[3,4] from the
//   # argument x / f32[3,16] output of dot_general
//   jax.grad(h, argnums=2)(w1, w2, x)   # [[0, 0, 0, 0], [0.5, ...], [4.5, ...]]
#include <flaxpp/flaxpp.hpp>
#include <iostream>

#include "verdict.hpp"

using namespace flaxpp;

int main() try {
  // The policy sees what JAX's sees: the primitive, its operands' avals and its params.
  const PolicyPtr save_wide_dots = checkpoint_policies::custom(
      "save_wide_dots",
      [](const ir::Primitive& prim, std::span<const AVal> avals, const ir::Params&) {
        const bool wide = &prim == &lax::dot_general_p && avals[1].shape.dims().back() >= 16;
        return wide ? ir::Decision::save() : ir::Decision::recompute();
      });
  const ArrayFn f = [](std::span<const Array> a) {
    return std::vector<Array>{sum(square(matmul(relu(matmul(a[2], a[0])), a[1])))};
  };
  const ArrayFn h = checkpoint(f, save_wide_dots);
  const Array w1 = Array::full(Shape{4, 16}, 0.25, DType::f32);
  const Array w2 = Array::full(Shape{16, 2}, 1.0 / 16, DType::f32);
  const Array x =
      Array::from_vector(std::vector<float>{-5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6}, Shape{3, 4});
  const std::vector<Array> args{w1, w2, x}, one{Array::scalar(1.0f)};
  const std::string names[] = {"w1", "w2", "x"};
  print_saved_residuals(h, args, names, std::cout);
  const Array dx = vjp(h, args).backward(one)[2];
  std::cout << "dh/dx = " << dx << "\n";

  std::vector<std::string> saved;
  for (const SavedResidual& r : saved_residuals(h, args))
    saved.push_back(r.str(names));
  const std::vector<std::string> want{
      "f32[4,16] from the argument w1", "f32[16,2] from the argument w2",
      "f32[3,4] from the argument x", "f32[3,16] output of dot_general"};
  const std::vector<float> want_dx{0, 0, 0, 0, 0.5f, 0.5f, 0.5f, 0.5f, 4.5f, 4.5f, 4.5f, 4.5f};
  return verdict(saved == want && dx.to_vector<float>() == want_dx,
                 "the custom policy saved only the wide product, as JAX's does",
                 "the custom policy kept other values than JAX's, or the gradient differs");
} catch (const Error& e) {  // e.g. FLAXPP_DEVICE=cuda where no GPU is visible
  std::cerr << e.what() << "\n";
  return 1;
}
