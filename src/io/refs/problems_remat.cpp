// Reference problems of the remat family (refs-format.md, "The seed problems" and
// "saved_residuals"): f(w1, w2, x) = sum((relu(x @ w1) @ w2) ** 2) and its named variant g,
// checkpointed under a policy; their values, gradients and saved residuals.
#include "flaxpp/io/policy_spec.hpp"
#include "flaxpp/io/refs.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "io/refs/case_budget.hpp"
#include "io/refs/problems_shared.hpp"

namespace flaxpp::refs {

std::vector<Array> dot_policy_f(std::span<const Array> a) {
  return {sum(power(matmul(relu(matmul(a[2], a[0])), a[1]), 2))};
}

std::vector<Array> named_dot_policy_g(std::span<const Array> a) {
  const Array h = checkpoint_name(matmul(a[2], a[0]), "a");
  const Array r = checkpoint_name(relu(h), "b");
  return {sum(power(checkpoint_name(matmul(r, a[1]), "c"), 2))};
}

namespace {

// w1 f32[d,d], w2 f32[d,d], x f32[N,d], on the case's device.
std::vector<Array> weights_and_x(const Inputs& in, const CaseContext& cx) {
  std::vector<Array> out;
  for (const char* key : {"w1", "w2", "x"}) {
    const Array a = in.array(key);
    if (a.dtype() != DType::f32)
      throw InputError(
          detail::str(in.path(), ".", key, ": expected float32 data, got ", dtype_name(a.dtype())));
    out.push_back(a.to(cx.device));
  }
  const std::int64_t d = out[0].shape().rank() == 2 ? out[0].shape()[0] : -1;
  if (out[0].shape() != Shape{d, d} || out[1].shape() != Shape{d, d} || out[2].rank() != 2 ||
      out[2].shape()[1] != d)
    throw InputError(detail::str(in.path(),
                                 ": expected w1 f32[d,d], w2 f32[d,d] and x f32[N,d], got w1 ",
                                 out[0].aval(), ", w2 ", out[1].aval(), ", x ", out[2].aval()));
  return out;
}

// The checkpointed function, or `fn` itself for the policy spec "none".
ArrayFn with_policy(const ArrayFn& fn, const Inputs& in, const char* fallback, bool allow_none) {
  PolicyPtr policy;
  try {
    policy = in.has("policy") ? io::policy_from_spec(in.raw("policy"), in.path() + ".policy")
                              : io::policy_from_spec(Json(fallback));
  } catch (const ParseError& e) {
    throw InputError(e.what());
  }
  if (checkpoint_policies::is_none(policy) && !allow_none)
    throw InputError(detail::str(in.path(), ".policy: \"none\" is not valid for this problem"));
  return checkpoint(fn, policy);
}

// jax.grad(fn, argnums=(0, 1, 2)) as the tree {"w1", "w2", "x"}.
Tree grads_tree(const ArrayFn& fn, const std::vector<Array>& args) {
  const VjpResult r = vjp(fn, args);
  const Array one = Array::full(Shape{}, 1.0, r.outputs[0].dtype(), r.outputs[0].device());
  const std::vector<Array> g = r.backward(std::span<const Array>(&one, 1));
  return Tree{{"w1", g[0]}, {"w2", g[1]}, {"x", g[2]}};
}

// refs-format's kind of a saved residual, from JAX's description.
std::string residual_kind(const SavedResidual& r) {
  switch (r.kind) {
    case SavedResidual::Kind::argument:
      return "argument";
    case SavedResidual::Kind::constant:
      return "constant";
    case SavedResidual::Kind::literal:
      return "literal";
    case SavedResidual::Kind::named:
      return "named:" + r.name;
    case SavedResidual::Kind::output:
      return r.primitive == "dot_general" ? "dot_general" : "other";
  }
  return "other";
}

}  // namespace

Records residual_records(const std::vector<SavedResidual>& residuals) {
  Records records;
  for (const SavedResidual& r : residuals)
    records.items.push_back(Json{{"dtype", dtype_name(r.aval.dtype)},
                                 {"shape", r.aval.shape.dims()},
                                 {"kind", residual_kind(r)}});
  return records;
}

void register_remat_problems(ProblemRegistry& registry) {
  registry.add("checkpoint_dot_policy", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const ArrayFn h =
        checkpoint(dot_policy_f, checkpoint_policies::dots_with_no_batch_dims_saveable());
    return Tree(h(weights_and_x(in, cx))[0]);
  });
  registry.add(
      "checkpoint_dot_policy_grad", [](const Inputs& in, const CaseContext& cx) -> Outcome {
        return grads_tree(with_policy(dot_policy_f, in, "dots_with_no_batch_dims_saveable", true),
                          weights_and_x(in, cx));
      });
  registry.add("named_dot_policy_grad", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    if (!in.has("policy"))
      throw InputError(detail::str(in.path(), ".policy: missing (a policy spec)"));
    return grads_tree(with_policy(named_dot_policy_g, in, "none", true), weights_and_x(in, cx));
  });
  registry.add("saved_residuals", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const std::string function = in.string("function");
    if (!in.has("policy"))
      throw InputError(detail::str(in.path(), ".policy: missing (a policy spec)"));
    LeavesLoss h;
    if (function == "checkpoint_dot_policy" || function == "named_dot_policy") {
      h.fn =
          function == "checkpoint_dot_policy" ? ArrayFn(dot_policy_f) : ArrayFn(named_dot_policy_g);
      h.args = weights_and_x(in, cx);
    } else if (function == "mlp_loss") {
      // h(params, x) = checkpoint(sum(MLP.apply({"params": p}, x) ** 2)), params from init.
      const Array x = in.array("x").to(cx.device);
      const nn::MLP mlp{.features = mlp_features(in)};
      check_mlp_memory(in, x, mlp.features, kGradCopies);
      const nn::Model model(mlp);
      h = sum_of_squares_of_leaves(
          model, model.init(random::key(in.integer("seed"), cx.mode), x)["params"], x);
    } else if (function == "block_loss") {
      h = block_loss(in, cx);
    } else if (function == "conv_block_loss") {
      h = conv_block_loss(in, cx);
    } else {
      throw InputError(detail::str(
          in.path(), ".function: unknown function \"", function,
          "\"; expected checkpoint_dot_policy, named_dot_policy, mlp_loss, block_loss or "
          "conv_block_loss"));
    }
    return residual_records(saved_residuals(with_policy(h.fn, in, "none", false), h.args));
  });
}

}  // namespace flaxpp::refs
