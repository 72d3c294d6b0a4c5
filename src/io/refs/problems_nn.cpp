// Reference problems of the module family (refs-format.md, "The seed problems" and "Modules,
// gradients, remat"): linen MLPs (plain and lifted by remat), LayerNorm, Dropout, the NNX MLP,
// and saved_residuals of mlp_loss.
#include "flaxpp/nn/dropout.hpp"
#include "flaxpp/nn/layer_norm.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/nn/nnx.hpp"
#include "flaxpp/nn/remat.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "io/refs/case_budget.hpp"
#include "io/refs/problems_shared.hpp"

namespace flaxpp::refs {
namespace {

Array flat(const Array& a) {
  return reshape(a, {-1});
}

// init + apply of `model` (an MLP of `features`) on x, flattened (the forward seed problems).
template <class Model>
Tree forward(const Model& model, std::span<const std::int64_t> features, const Inputs& in,
             const CaseContext& cx) {
  const Array x = float_input(in, "x", cx, 1);
  check_mlp_memory(in, x, features, kInitCopies);
  const nn::Variables v = model.init(random::key(in.integer("seed"), cx.mode), x);
  return Tree(flat(model.apply(v, x)));
}

// The NNX MLP of checkpoint_forward: N Linear(F, F) built from one Rngs(seed), in order.
nnx::List<nnx::Linear> nnx_mlp(const Inputs& in, const CaseContext& cx) {
  const std::int64_t features = positive_integer(in, "features");
  const std::int64_t layers = positive_integer(in, "num_layers");
  const double f = static_cast<double>(features);
  check_case_memory(4 * kInitCopies * static_cast<double>(layers) * (f + 1) * f,
                    in.path() + ".num_layers",
                    detail::str(layers, " Linear layers of ", features, " features"));
  nnx::Rngs rngs(in.integer("seed"));
  nnx::List<nnx::Linear> out;
  for (std::int64_t i = 0; i < layers; ++i) {
    cx.check_time();
    out.items.emplace_back(features, features, rngs);
  }
  return out;
}

}  // namespace

void register_nn_problems(ProblemRegistry& registry) {
  registry.add("mlp_init", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const nn::MLP mlp{.features = mlp_features(in)};
    const Array x = float_input(in, "x", cx, 1);
    check_mlp_memory(in, x, mlp.features, kInitCopies);
    return nn::Model(mlp).init(random::key(in.integer("seed"), cx.mode), x);
  });
  registry.add("mlp_grad", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = float_input(in, "x", cx, 2);
    const nn::MLP mlp{.features = mlp_features(in)};
    check_mlp_memory(in, x, mlp.features, kGradCopies);
    const random::Key key = random::key(in.integer("seed"), cx.mode);
    auto run = [&](const auto& model) {
      const nn::Variables v = model.init(key, x);
      const ValueAndGrad r = sum_of_squares_grad(model, v["params"], x);
      return Tree{{"loss", r.value}, {"grads", Tree{{"params", r.grads[0]}}}};
    };
    return run(remat<nn::MLP>(policy_input(in))(mlp));
  });
  registry.add("nn_checkpoint_forward", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const std::int64_t f = positive_integer(in, "features");
    const std::vector<std::int64_t> features{f, f};
    return forward(checkpoint<nn::MLP>()(nn::MLP{.features = features}), features, in, cx);
  });
  registry.add("nn_remat_policy", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const std::int64_t f = positive_integer(in, "features");
    const std::vector<std::int64_t> features{f, f, f};
    return forward(remat<nn::MLP>(checkpoint_policies::dots_with_no_batch_dims_saveable())(
                       nn::MLP{.features = features}),
                   features, in, cx);
  });
  registry.add("layernorm", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const nn::Model model(nn::LayerNorm{.epsilon = in.number("epsilon", 1e-6),
                                        .use_bias = in.boolean("use_bias", true),
                                        .use_scale = in.boolean("use_scale", true)});
    const Array x = float_input(in, "x", cx, 1);
    return Tree(model.apply(model.init(random::key(in.integer("seed"), cx.mode), x), x));
  });
  registry.add("dropout", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const nn::Model model(nn::Dropout{.rate = in.number("rate")});
    return Tree(model.apply_with_rngs(
        nn::Variables{}, nn::RngStreams{{"dropout", random::key(in.integer("seed"), cx.mode)}},
        float_input(in, "x", cx, 0)));
  });
  registry.add("checkpoint_forward", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const auto mlp = nnx_mlp(in, cx);
    const auto forward_fn =
        nnx::remat<nnx::List<nnx::Linear>>([](const nnx::List<nnx::Linear>& m, const Array& x) {
          Array h = x;
          for (const nnx::Linear& layer : m.items)
            h = relu(layer(h));
          return h;
        });
    return Tree(flat(forward_fn(mlp, float_input(in, "x", cx, 1))));
  });
  registry.add("nnx_mlp_init", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    return Tree{{"layers", nnx::state(nnx_mlp(in, cx))}};
  });
}

}  // namespace flaxpp::refs
