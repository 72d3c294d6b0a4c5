// A user's own check program, as docs/EXTENDING.md shows it: one problem registered beside the
// built-in ones, then refs::check_main, which behaves as `flaxpp check` does. Its cases
// (user_check.json) are JAX's values and gradients, written by python_compat/flaxpp_refs.py
// (gen_user_check.py). Built against the installed package by tests/package/test_package.sh.
#include <flaxpp/flaxpp.hpp>
#include <flaxpp/io/refs.hpp>

using namespace flaxpp;

int main(int argc, char** argv) {
  refs::ProblemRegistry registry = refs::ProblemRegistry::builtin();
  // jax.nn.gelu(x @ w + b): its value, and the gradients of its sum with respect to w and b.
  registry.add("user.affine_gelu", [](const refs::Inputs& in, const refs::CaseContext&) {
    const Array x = in.array("x");
    auto f = [&](const Tree& p) {
      return sum(gelu(matmul(x, p["w"].array()) + p["b"].array()));
    };
    const Tree params{{"w", in.array("w")}, {"b", in.array("b")}};
    const Array value = gelu(matmul(x, params["w"].array()) + params["b"].array());
    return refs::Outcome{Tree{{"value", value}, {"grads", grad(f)(params)}}};
  });
  return refs::check_main(argc, argv, registry);
}
