// The trajectory problems: train_mlp (refs-format.md, "Training (optax)"), a linen MLP
// (optionally lifted by remat), and lm_train ("Transformers"), the LM on next-token
// cross-entropy; each trained with an optax optimiser on batches taken in order, cycling.
#include "flaxpp/io/optimizer_spec.hpp"
#include "flaxpp/io/policy_spec.hpp"
#include "flaxpp/io/refs.hpp"
#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/train/train_state.hpp"
#include "io/refs/case_budget.hpp"
#include "io/refs/problems_shared.hpp"
#include "io/refs/trajectory.hpp"
#include "tools/mlp_apply.hpp"

namespace flaxpp::refs {
namespace {

// Columns [from, to) of a (N, T) array, as a new host array.
Array columns(const Array& a, std::int64_t from, std::int64_t to) {
  const std::int64_t n = a.shape()[0], t = a.shape()[1];
  const std::span<const std::int32_t> v = a.host_span<std::int32_t>();
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(n * (to - from)));
  for (std::int64_t r = 0; r < n; ++r)
    out.insert(out.end(), v.begin() + r * t + from, v.begin() + r * t + to);
  return Array::from_vector(out, Shape{n, to - from}, Device::cpu());
}

Tree train_mlp(const nn::MLP& mlp, const PolicyPtr& policy, const Array& x, const Array& y,
               const optim::GradientTransformation& tx, std::int64_t steps, std::int64_t bs,
               const random::Key& key, const CaseContext& cx) {
  const Tree params = nn::Model(mlp).init(key, take_rows<float>(x, 0, bs))["params"];
  train::ClassifierStep step(train::mlp_apply(mlp, policy), tx);
  return train_trajectory(
      step, step.init(params), x, steps, bs,
      [&](std::int64_t start) {
        return std::pair{take_rows<float>(x, start, bs), take_rows<std::int32_t>(y, start, bs)};
      },
      cx);
}

}  // namespace

void register_train_problems(ProblemRegistry& registry) {
  registry.add("train_mlp", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = in.array("x"), y = in.array("y");
    if (x.dtype() != DType::f32 || x.rank() != 2)
      throw InputError(detail::str(in.path(), ".x: expected float32 [N, D], got ", x.aval()));
    if (y.dtype() != DType::i32 || y.shape() != Shape{x.shape()[0]})
      throw InputError(
          detail::str(in.path(), ".y: expected int32 labels [", x.shape()[0], "], got ", y.aval()));
    const std::int64_t steps = positive_integer(in, "steps");
    const std::int64_t bs = positive_integer(in, "batch_size");
    if (x.shape()[0] < 1)
      throw InputError(detail::str(in.path(), ".x: expected at least one row, got ", x.aval()));
    const nn::MLP mlp{.features = mlp_features(in)};
    // A batch of x and y (twice: taken, then on the device), the model training on it, and
    // one float loss per step.
    const double d = static_cast<double>(x.shape()[1]), b = static_cast<double>(bs);
    check_case_memory(
        2 * b * (d + 1) * 4, in.path() + ".batch_size",
        detail::str("a batch of ", bs, " rows of ", x.shape()[1], " features (and its copy)"));
    check_mlp_memory(in, x.shape()[1], mlp.features, bs, kTrainCopies);
    check_case_memory(static_cast<double>(steps) * 4, in.path() + ".steps",
                      detail::str("keeping the loss of each of ", steps, " steps"));
    const optim::GradientTransformation tx = optimizer_input(in);
    const PolicyPtr policy = policy_input(in);
    const random::Key key = random::key(in.integer("seed"), cx.mode);
    return train_mlp(mlp, policy, x, y, tx, steps, bs, key, cx);
  });
  registry.add("lm_train", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array tokens = in.array("tokens");
    if (tokens.dtype() != DType::i32 || tokens.rank() != 2 || tokens.shape()[0] < 1 ||
        tokens.shape()[1] < 2)
      throw InputError(detail::str(in.path(), ".tokens: expected int32 [N, T+1] with N >= 1 and ",
                                   "T >= 1, got ", tokens.aval()));
    const std::int64_t steps = positive_integer(in, "steps");
    const std::int64_t bs = positive_integer(in, "batch_size");
    const std::int64_t T = tokens.shape()[1] - 1;
    const nn::LanguageModel lm{.vocab = positive_integer(in, "vocab"),
                               .features = positive_integer(in, "features"),
                               .num_layers = positive_integer(in, "num_layers"),
                               .num_heads = positive_integer(in, "num_heads"),
                               .mlp_dim = positive_integer(in, "mlp_dim"),
                               .max_len = T,
                               .policy = policy_input(in)};
    // The logits and their gradient dominate: a few (bs, T, vocab) and (bs, T, mlp_dim) arrays
    // per layer.
    auto d = [](std::int64_t v) { return static_cast<double>(v); };
    const double per_token = d(lm.vocab) + d(lm.num_layers) * (d(lm.mlp_dim) + 8 * d(lm.features) +
                                                               d(lm.num_heads) * d(T));
    check_case_memory(
        d(bs) * d(T) * per_token * 4 * kTrainCopies, in.path() + ".batch_size",
        detail::str("a batch of ", bs, " sequences of ", T, " tokens through the LM"));
    check_case_memory(static_cast<double>(steps) * 4, in.path() + ".steps",
                      detail::str("keeping the loss of each of ", steps, " steps"));
    const optim::GradientTransformation tx = optimizer_input(in);
    const random::Key key = random::key(in.integer("seed"), cx.mode);
    const nn::Model model(lm);
    const Tree params =
        model.init(key, columns(take_rows<std::int32_t>(tokens, 0, bs), 0, T))["params"];
    const train::ApplyFn apply = [model](const Tree& p, const Array& x) {
      return model.apply(nn::Variables{{"params", p}}, x);
    };
    train::ClassifierStep step(apply, tx);
    return train_trajectory(
        step, step.init(params), tokens, steps, bs,
        [&](std::int64_t start) {
          const Array batch = take_rows<std::int32_t>(tokens, start, bs);
          return std::pair{columns(batch, 0, T), columns(batch, 1, T + 1)};
        },
        cx);
  });
}

}  // namespace flaxpp::refs
