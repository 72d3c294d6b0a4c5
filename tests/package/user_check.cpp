// A user's own check program, as docs/EXTENDING.md shows it: problems registered beside the
// built-in ones, then refs::check_main, which behaves as `flaxpp check` does. Its cases
// (user_check.json) are JAX's values, gradients and saved residuals, written by
// python_compat/flaxpp_refs.py (gen_user_check.py, which holds the JAX originals). Built
// against the installed package by tests/package/test_package.sh.
#include <flaxpp/flaxpp.hpp>
#include <flaxpp/io/policy_spec.hpp>
#include <flaxpp/io/refs.hpp>

using namespace flaxpp;

namespace {

// gen_user_check.py's `layer`: x @ w + b named "hidden", LayerNorm written out with scale and
// offset, then gelu.
Array layer(const Array& w, const Array& b, const Array& scale, const Array& offset,
            const Array& x) {
  const Array h = checkpoint_name(matmul(x, w) + b, "hidden");
  const Array c = h - mean(h, Axes{-1}, true);
  return gelu(c / sqrt(mean(c * c, Axes{-1}, true) + 1e-5) * scale + offset);
}

// The layer of a case's inputs, its parameters (w, b, scale, offset) first and x last, as
// one jax.checkpoint under the case's policy spec.
struct Layer {
  ArrayFn fn;
  std::vector<Array> args;
};
Layer checkpointed_layer(const refs::Inputs& in) {
  const PolicyPtr policy = io::policy_from_spec(in.raw("policy"), in.path() + ".policy");
  ArrayFn f = [](std::span<const Array> a) {
    return std::vector<Array>{sum(layer(a[0], a[1], a[2], a[3], a[4]))};
  };
  return {checkpoint(f, policy),
          {in.array("w"), in.array("b"), in.array("scale"), in.array("offset"), in.array("x")}};
}

}  // namespace

int main(int argc, char** argv) {
  refs::ProblemRegistry registry = refs::ProblemRegistry::builtin();
  // jax.nn.gelu(x @ w + b): its value, and the gradients of its sum with respect to w and b.
  registry.add("user.affine_gelu", [](const refs::Inputs& in, const refs::CaseContext&) {
    const Array x = in.array("x");
    auto f = [&](const Tree& p) { return sum(gelu(matmul(x, p["w"].array()) + p["b"].array())); };
    const Tree params{{"w", in.array("w")}, {"b", in.array("b")}};
    const Array value = gelu(matmul(x, params["w"].array()) + params["b"].array());
    return refs::Outcome{Tree{{"value", value}, {"grads", grad(f)(params)}}};
  });
  // The layer under its policy: its value, and the gradients of its sum.
  registry.add("user.layer", [](const refs::Inputs& in, const refs::CaseContext&) {
    const Layer l = checkpointed_layer(in);
    const Array value = layer(l.args[0], l.args[1], l.args[2], l.args[3], l.args[4]);
    auto f = [&](const Tree& p) {
      return l.fn(std::vector<Array>{p["w"].array(), p["b"].array(), p["scale"].array(),
                                     p["offset"].array(), l.args[4]})[0];
    };
    const Tree params{
        {"w", l.args[0]}, {"b", l.args[1]}, {"scale", l.args[2]}, {"offset", l.args[3]}};
    return refs::Outcome{Tree{{"value", value}, {"grads", grad(f)(params)}}};
  });
  // What the layer's backward pass keeps under the policy (jax's saved_residuals).
  registry.add("user.layer_residuals", [](const refs::Inputs& in, const refs::CaseContext&) {
    const Layer l = checkpointed_layer(in);
    return refs::Outcome{refs::residual_records(saved_residuals(l.fn, l.args))};
  });
  return refs::check_main(argc, argv, registry);
}
