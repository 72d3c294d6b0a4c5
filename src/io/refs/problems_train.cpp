// Reference problem train_mlp (refs-format.md, "Training (optax)"): a linen MLP (optionally
// lifted by remat) trained with an optax optimiser on batches taken in order, cycling.
#include "flaxpp/io/optimizer_spec.hpp"
#include "flaxpp/io/policy_spec.hpp"
#include "flaxpp/io/refs.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/train/train_state.hpp"
#include "io/refs/case_budget.hpp"

namespace flaxpp::refs {
namespace {

// Rows (start + j) mod N for j < bs of a (N, ...) array, as a new host array.
template <class T>
Array take_rows(const Array& a, std::int64_t start, std::int64_t bs) {
  const std::int64_t n = a.shape()[0], row = a.size() / std::max<std::int64_t>(n, 1);
  const std::span<const T> v = a.host_span<T>();
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(bs * row));
  for (std::int64_t j = 0; j < bs; ++j) {
    const std::int64_t r = (start + j) % n;
    out.insert(out.end(), v.begin() + r * row, v.begin() + (r + 1) * row);
  }
  std::vector<std::int64_t> dims = a.shape().dims();
  dims[0] = bs;
  return Array::from_vector(out, Shape(dims));
}

Tree train_mlp(const nn::MLP& mlp, const std::optional<PolicyPtr>& policy, const Array& x,
               const Array& y, const optim::GradientTransformation& tx, std::int64_t steps,
               std::int64_t bs, const random::Key& key, const CaseContext& cx) {
  train::ClassifierStep step(train::mlp_apply(mlp, policy), tx);
  train::TrainState state =
      step.init(nn::Model(mlp).init(key, take_rows<float>(x, 0, bs))["params"]);
  std::vector<float> losses;
  const std::int64_t n = x.shape()[0];
  // Step i starts at row (i * bs) mod n, kept below n so that nothing overflows.
  for (std::int64_t i = 0, start = 0; i < steps; ++i, start = (start + bs % n) % n) {
    cx.check_time();
    losses.push_back(
        step(state, take_rows<float>(x, start, bs), take_rows<std::int32_t>(y, start, bs)));
  }
  return Tree{{"losses", Array::from_vector(losses, Shape{steps})}, {"params", state.params}};
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
    optim::GradientTransformation tx;
    std::optional<PolicyPtr> policy;
    try {
      tx = io::optimizer_from_spec(in.raw("optimizer"), in.path() + ".optimizer");
      if (!in.has("policy"))
        throw InputError(detail::str(in.path(), ".policy: missing (a policy spec or \"none\")"));
      policy = io::policy_from_spec(in.raw("policy"), in.path() + ".policy");
    } catch (const ParseError& e) {
      throw InputError(e.what());
    }
    const random::Key key = random::key(in.integer("seed"), cx.mode);
    return train_mlp(mlp, policy, x, y, tx, steps, bs, key, cx);
  });
}

}  // namespace flaxpp::refs
