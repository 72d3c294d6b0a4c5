// Reference problems of convolutional networks (refs-format.md, "Convolutions, pooling,
// normalisation and batch statistics"): conv and conv_grad (nn.Conv), pool and pool_grad
// (nn.max_pool, nn.avg_pool), conv_transpose (nn.ConvTranspose, flaxpp's own problem:
// docs/refs-problems.md), norm_grad (nn.RMSNorm, nn.GroupNorm), batchnorm (nn.BatchNorm's
// statistics through apply_mutable), cnn_grad and cnn_train (the contract's CNN, its batch
// statistics the train step's aux) and saved_residuals' conv_block_loss.
#include <algorithm>
#include <cmath>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/nn/cnn.hpp"
#include "flaxpp/nn/conv.hpp"
#include "flaxpp/nn/normalization.hpp"
#include "flaxpp/nn/pooling.hpp"
#include "flaxpp/optim/losses.hpp"
#include "io/refs/problems_shared.hpp"
#include "io/refs/trajectory.hpp"
#include "tools/cnn_apply.hpp"

namespace flaxpp::refs {
namespace {

using Axes = std::vector<std::int64_t>;

// Input `key` (absent: `fallback`): a padding string or a list of [low, high] pairs.
lax::PaddingSpec padding_input(const Inputs& in, const char* key, const std::string& fallback) {
  if (!in.has(key)) return fallback;
  const Json& raw = in.raw(key);
  if (raw.is_string()) return raw.get<std::string>();
  lax::Padding pairs;
  const auto integral = [](const Json& v) {
    return v.is_number_integer() ||
           (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
  };
  if (raw.is_array())
    for (const Json& pair : raw) {
      if (!pair.is_array() || pair.size() != 2 || !integral(pair[0]) || !integral(pair[1])) {
        pairs.clear();
        break;
      }
      pairs.emplace_back(pair[0].get<std::int64_t>(), pair[1].get<std::int64_t>());
    }
  if (pairs.empty() || pairs.size() != raw.size())
    throw InputError(detail::str(in.path(), ".", key,
                                 ": expected \"SAME\", \"VALID\" or a list of [low, high] integer "
                                 "pairs, got ",
                                 raw.dump()));
  return pairs;
}

// Input `key`: a list of positive integers, one per spatial axis of the NHWC `x`; `fallback`
// (all ones) when absent and `fallback_ones`.
Axes window_input(const Inputs& in, const char* key, const Array& x, bool fallback_ones) {
  const std::size_t spatial = static_cast<std::size_t>(x.rank()) - 2;
  if (!in.has(key) && fallback_ones) return Axes(spatial, 1);
  const Axes v = in.int_list(key);
  if (v.size() != spatial || std::any_of(v.begin(), v.end(), [](std::int64_t e) { return e < 1; }))
    throw InputError(detail::str(in.path(), ".", key, ": expected ", spatial,
                                 " positive integers (one per spatial axis of ", x.aval(), ")"));
  return v;
}

// Input "x" of the convolution problems: float32 [B, spatial..., C].
Array image_input(const Inputs& in, const CaseContext& cx) {
  return float_input(in, "x", cx, 3);
}

// Refuses a windowed op of `x` whose float32 input, result (`features` channels at each of
// x's positions: stride 1, the padding of "SAME") and their cotangents, a few copies each,
// would not fit in host memory.
void check_window_memory(const Inputs& in, const Array& x, std::int64_t features) {
  const double positions = static_cast<double>(x.shape().size() / x.shape()[-1]);
  const double elements =
      positions * static_cast<double>(x.shape()[-1] + std::max<std::int64_t>(features, 1));
  check_case_memory(4.0 * 4.0 * elements, in.path() + ".x", "a windowed op of these sizes");
}

nn::Conv conv_input(const Inputs& in, const Array& x) {
  nn::Conv conv{.features = positive_integer(in, "features"),
                .kernel_size = window_input(in, "kernel_size", x, false),
                .strides = window_input(in, "strides", x, true),
                .padding = padding_input(in, "padding", "SAME"),
                .feature_group_count = in.integer("feature_group_count", 1),
                .use_bias = in.boolean("use_bias", true)};
  check_window_memory(in, x, conv.features);
  return conv;
}

Array pool_input(const Inputs& in, const Array& x) {
  const std::string kind = in.string("kind");
  if (kind != "max" && kind != "avg")
    throw InputError(
        detail::str(in.path(), ".kind", ": expected \"max\" or \"avg\", got \"", kind, "\""));
  const Axes window = window_input(in, "window_shape", x, false);
  check_window_memory(in, x, x.shape()[-1]);
  const nn::PoolOptions options{.strides = window_input(in, "strides", x, true),
                                .padding = padding_input(in, "padding", "VALID")};
  return kind == "max" ? nn::max_pool(x, window, options) : nn::avg_pool(x, window, options);
}

// value_and_grad of sum(model.apply({"params": p}, x) ** power) w.r.t. the params and x.
template <class Model>
Tree power_sum_grads(const Model& model, const Tree& params, const Array& x, std::int64_t power) {
  const Tree args[] = {params, x};
  const int argnums[] = {0, 1};
  const ValueAndGrad r = value_and_grad(
      [&](std::span<const Tree> a) {
        return sum(
            lax::integer_pow(model.apply(nn::Variables{{"params", a[0]}}, a[1].array()), power));
      },
      args, argnums);
  return Tree{{"loss", r.value}, {"grads", Tree{{"params", r.grads[0]}, {"x", r.grads[1]}}}};
}

Tree norm_grad(const Inputs& in, const Array& x, const random::Key& key) {
  const std::string kind = in.string("kind");
  const double epsilon = in.number("epsilon", 1e-6);
  const auto run = [&](const auto& module) {
    const nn::Model model(module);
    const Tree params = model.init(key, x)["params"];
    Tree out = power_sum_grads(model, params, x, 3);
    return Tree{{"y", model.apply(nn::Variables{{"params", params}}, x)},
                {"loss", out["loss"]},
                {"grads", out["grads"]}};
  };
  if (kind == "rmsnorm") return run(nn::RMSNorm{.epsilon = epsilon});
  if (kind == "groupnorm")
    return run(nn::GroupNorm{.num_groups = positive_integer(in, "num_groups"), .epsilon = epsilon});
  throw InputError(
      detail::str(in.path(), ".kind: expected \"rmsnorm\" or \"groupnorm\", got \"", kind, "\""));
}

}  // namespace

LeavesLoss conv_block_loss(const Inputs& in, const CaseContext& cx) {
  const Array x = float_input(in, "x", cx, 4);
  const nn::ConvBlock block{.features = positive_integer(in, "features")};
  check_window_memory(in, x, block.features);
  const nn::Model model(block);
  return sum_of_squares_of_leaves(
      model, model.init(random::key(in.integer("seed"), cx.mode), x)["params"], x);
}

void register_cnn_problems(ProblemRegistry& registry) {
  registry.add("conv", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = image_input(in, cx);
    const nn::Model model(conv_input(in, x));
    const nn::Variables v = model.init(random::key(in.integer("seed"), cx.mode), x);
    return Tree{{"params", v["params"]}, {"y", model.apply(v, x)}};
  });
  registry.add("conv_grad", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = image_input(in, cx);
    const nn::Model model(conv_input(in, x));
    const Tree params = model.init(random::key(in.integer("seed"), cx.mode), x)["params"];
    return power_sum_grads(model, params, x, 2);
  });
  registry.add("conv_transpose", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = image_input(in, cx);
    const nn::ConvTranspose conv{.features = positive_integer(in, "features"),
                                 .kernel_size = window_input(in, "kernel_size", x, false),
                                 .strides = window_input(in, "strides", x, true),
                                 .padding = padding_input(in, "padding", "SAME"),
                                 .kernel_dilation = window_input(in, "kernel_dilation", x, true),
                                 .use_bias = in.boolean("use_bias", true),
                                 .transpose_kernel = in.boolean("transpose_kernel", false)};
    // The output grows by the strides: its positions are those of x times their product.
    std::int64_t growth = 1;
    for (const std::int64_t s : conv.strides)
      growth *= s;
    check_window_memory(in, x, conv.features * growth);
    const nn::Model model(conv);
    const Tree params = model.init(random::key(in.integer("seed"), cx.mode), x)["params"];
    const Tree out = power_sum_grads(model, params, x, 2);
    return Tree{{"params", params},
                {"y", model.apply(nn::Variables{{"params", params}}, x)},
                {"loss", out["loss"]},
                {"grads", out["grads"]}};
  });
  registry.add("pool", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    return pool_input(in, image_input(in, cx));
  });
  registry.add("pool_grad", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = image_input(in, cx);
    return grad([&](const Array& v) { return sum(square(pool_input(in, v))); })(x);
  });
  registry.add("norm_grad", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = float_input(in, "x", cx, 1);
    check_case_memory(4.0 * 16.0 * static_cast<double>(x.shape().size()), in.path() + ".x",
                      "a normalisation of these sizes");
    return norm_grad(in, x, random::key(in.integer("seed"), cx.mode));
  });
  registry.add("batchnorm", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = float_input(in, "x", cx, 1);
    const Array x_eval = float_input(in, "x_eval", cx, 1);
    if (x_eval.shape().rank() != x.rank() || x_eval.shape()[-1] != x.shape()[-1])
      throw InputError(detail::str(in.path(), ".x_eval: expected the features of x (", x.aval(),
                                   "), got ", x_eval.aval()));
    check_case_memory(4.0 * 8.0 * static_cast<double>(x.shape().size() + x_eval.shape().size()),
                      in.path() + ".x", "a batch norm of these sizes");
    const nn::Model model(nn::BatchNorm{.momentum = in.number("momentum", 0.99),
                                        .epsilon = in.number("epsilon", 1e-5)});
    const nn::Variables v = model.init(random::key(in.integer("seed"), cx.mode), x, false);
    auto [y, updates] = model.apply_mutable(v, {"batch_stats"}, x, false);
    const nn::Variables eval{{"params", v["params"]}, {"batch_stats", updates["batch_stats"]}};
    return Tree{{"y", y},
                {"batch_stats", updates["batch_stats"]},
                {"y_eval", model.apply(eval, x_eval, true)}};
  });
  registry.add("cnn_train", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = in.array("x"), y = in.array("y");
    if (x.dtype() != DType::f32 || x.rank() != 4 || x.shape()[0] < 1)
      throw InputError(
          detail::str(in.path(), ".x: expected float32 [N, H, W, C] with N >= 1, got ", x.aval()));
    if (y.dtype() != DType::i32 || y.shape() != Shape{x.shape()[0]})
      throw InputError(
          detail::str(in.path(), ".y: expected int32 labels [", x.shape()[0], "], got ", y.aval()));
    const std::int64_t steps = positive_integer(in, "steps");
    const std::int64_t bs = positive_integer(in, "batch_size");
    const nn::CNN cnn{.features = mlp_features(in),
                      .classes = positive_integer(in, "classes"),
                      .policy = policy_input(in),
                      .use_batchnorm = in.boolean("use_batchnorm", false)};
    const Array first = take_rows<float>(x, 0, bs);
    for (const std::int64_t f : cnn.features)
      check_window_memory(in, first, f * static_cast<std::int64_t>(kTrainCopies));
    check_case_memory(static_cast<double>(steps) * 4, in.path() + ".steps",
                      detail::str("keeping the loss of each of ", steps, " steps"));
    const nn::Model model(cnn);
    const nn::Variables v = model.init(random::key(in.integer("seed"), cx.mode), first);
    train::ClassifierStep step(train::cnn_apply(cnn), optimizer_input(in));
    return train_trajectory(
        step, step.init(v["params"], v.contains("batch_stats") ? v["batch_stats"] : Tree()), x,
        steps, bs,
        [&](std::int64_t start) {
          return std::pair{take_rows<float>(x, start, bs), take_rows<std::int32_t>(y, start, bs)};
        },
        cx);
  });
  registry.add("cnn_grad", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = float_input(in, "x", cx, 4);
    const Array labels = in.array("labels").to(cx.device);
    if (x.rank() != 4 || labels.dtype() != DType::i32 || labels.shape() != Shape{x.shape()[0]})
      throw InputError(detail::str(in.path(),
                                   ": expected x float32 [B, H, W, C] and labels int32 "
                                   "[B], got ",
                                   x.aval(), " and ", labels.aval()));
    const nn::CNN cnn{.features = mlp_features(in),
                      .classes = positive_integer(in, "classes"),
                      .policy = policy_input(in),
                      .use_batchnorm = false};
    for (const std::int64_t f : cnn.features)
      check_window_memory(in, x, f);
    const nn::Model model(cnn);
    const Tree params = model.init(random::key(in.integer("seed"), cx.mode), x)["params"];
    const Tree args[] = {params};
    const int argnums[] = {0};
    const ValueAndGrad r = value_and_grad(
        [&](std::span<const Tree> a) {
          return mean(optim::softmax_cross_entropy_with_integer_labels(
              model.apply(nn::Variables{{"params", a[0]}}, x), labels));
        },
        args, argnums);
    return Tree{{"loss", r.value}, {"grads", Tree{{"params", r.grads[0]}}}};
  });
}

}  // namespace flaxpp::refs
