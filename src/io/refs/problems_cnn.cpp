// Reference problems of convolutional networks (refs-format.md, "Convolutions, pooling,
// normalisation and batch statistics"): conv and conv_grad (nn.Conv), pool and pool_grad
// (nn.max_pool, nn.avg_pool).
#include <algorithm>
#include <cmath>

#include "flaxpp/nn/conv.hpp"
#include "flaxpp/nn/pooling.hpp"
#include "io/refs/problems_shared.hpp"

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

}  // namespace

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
    const Tree args[] = {params, x};
    const int argnums[] = {0, 1};
    const ValueAndGrad r = value_and_grad(
        [&](std::span<const Tree> a) {
          return sum(square(model.apply(nn::Variables{{"params", a[0]}}, a[1].array())));
        },
        args, argnums);
    return Tree{{"loss", r.value}, {"grads", Tree{{"params", r.grads[0]}, {"x", r.grads[1]}}}};
  });
  registry.add("pool", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    return pool_input(in, image_input(in, cx));
  });
  registry.add("pool_grad", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = image_input(in, cx);
    return grad([&](const Array& v) { return sum(square(pool_input(in, v))); })(x);
  });
}

}  // namespace flaxpp::refs
