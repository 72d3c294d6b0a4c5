// Reference problems of batching (refs-format.md, "Batching and sampling"): ensemble (Flax's
// nn.vmap of an MLP) and per_example_grads (jax.vmap of jax.grad).
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/nn/vmap.hpp"
#include "flaxpp/ops/slicing.hpp"
#include "flaxpp/optim/losses.hpp"
#include "flaxpp/transforms/vmap.hpp"
#include "io/refs/problems_shared.hpp"

namespace flaxpp::refs {
namespace {

// The contract's compact module holding the ensemble: nn.vmap(MLP, ...)(features)(x).
struct Ensemble {
  static constexpr const char* name = "Ensemble";
  std::vector<std::int64_t> features;
  std::int64_t members = 0;

  Array operator()(nn::Scope& s, const Array& x) const {
    return s(nn::vmap(nn::MLP{.features = features}, {.axis_size = members}), x);
  }
};

}  // namespace

void register_vmap_problems(ProblemRegistry& registry) {
  registry.add("ensemble", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = float_input(in, "x", cx, 1);
    const Ensemble ensemble{.features = mlp_features(in),
                            .members = positive_integer(in, "members")};
    check_mlp_memory(in, x, ensemble.features, kInitCopies * static_cast<double>(ensemble.members));
    const nn::Model model(ensemble);
    const nn::Variables v = model.init(random::key(in.integer("seed"), cx.mode), x);
    return Tree{{"params", v["params"]}, {"y", model.apply(v, x)}};
  });
  registry.add("per_example_grads", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = float_input(in, "x", cx, 2);
    const Array labels = in.array("labels").to(cx.device);
    if (x.rank() != 2 || x.shape()[0] < 1)
      throw InputError(
          detail::str(in.path(), ".x: expected float32 [B, D] with B >= 1, got ", x.aval()));
    if (labels.dtype() != DType::i32 || labels.shape() != Shape{x.shape()[0]})
      throw InputError(detail::str(in.path(), ".labels: expected int32 [", x.shape()[0], "], got ",
                                   labels.aval()));
    const nn::Model model(nn::MLP{.features = mlp_features(in)});
    // Each example's gradients are one copy of the parameters.
    check_mlp_memory(in, x, model.module().features,
                     kGradCopies + static_cast<double>(x.shape()[0]));
    const Tree params =
        model.init(random::key(in.integer("seed"), cx.mode), slice(x, {{0, 1}}))["params"];
    const auto loss = [&](const Tree& p, const Array& xi, const Array& yi) {
      const Array logits = model.apply(nn::Variables{{"params", p}}, expand_dims(xi, 0));
      return mean(optim::softmax_cross_entropy_with_integer_labels(logits, expand_dims(yi, 0)));
    };
    const Tree grads = vmap(grad(loss), {not_mapped, 0, 0})(params, x, labels);
    return Tree{{"grads", Tree{{"params", grads}}}};
  });
}

}  // namespace flaxpp::refs
