// nn.BatchNorm, nn.RMSNorm and nn.GroupNorm: Flax's _compute_stats and _normalize, step by
// step.
#include "flaxpp/nn/normalization.hpp"

#include "flaxpp/dist/all_reduce.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/ops/slicing.hpp"

namespace flaxpp::nn {
namespace {

using Axes = std::vector<std::int64_t>;

// Flax's _normalize with the statistics already broadcastable to x: (x - mean) times
// rsqrt(var + epsilon) (times scale), plus bias, the parameters of x's axis `feature_axis`.
Array normalize(Scope& s, const Array& x, const Array& mean, const Array& var, double epsilon,
                bool use_scale, bool use_bias, DType param_dtype,
                const initializers::Initializer& scale_init,
                const initializers::Initializer& bias_init, std::int64_t feature_axis) {
  const Shape features{x.shape()[feature_axis]};
  Axes broadcast(static_cast<std::size_t>(x.rank()), 1);
  broadcast[static_cast<std::size_t>(feature_axis)] = features[0];
  Array y = x - mean;
  Array mul = lax::rsqrt(var + epsilon);
  // The parameters join x's dtype (Flax promotes both to the wider one; equal for float32).
  const auto parameter = [&](const char* name, const initializers::Initializer& init) {
    return reshape(astype(s.param(name, init, features, param_dtype), x.dtype()), broadcast);
  };
  if (use_scale) mul = mul * parameter("scale", scale_init);
  y = y * mul;
  if (use_bias) y = y + parameter("bias", bias_init);
  return y;
}

void expect_floating(const char* module, const Scope& s, const Array& x, std::int64_t rank) {
  if (!is_floating(x.dtype()) || x.rank() < rank)
    throw ValueError(detail::str(module, " at ", s.path_str(), ": expected a floating input of ",
                                 rank, " or more axes, got ", x.aval()));
}

}  // namespace

Array BatchNorm::operator()(Scope& s, const Array& x) const {
  if (!use_running_average)
    throw ValueError(detail::str("BatchNorm at ", s.path_str(),
                                 ": use_running_average is given neither to the module nor to "
                                 "the call; give it to exactly one of them"));
  return run(s, x, *use_running_average);
}

Array BatchNorm::operator()(Scope& s, const Array& x, bool running) const {
  if (use_running_average)
    throw ValueError(detail::str("BatchNorm at ", s.path_str(),
                                 ": use_running_average is given both to the module and to the "
                                 "call; give it to exactly one of them (Flax's merge_param)"));
  return run(s, x, running);
}

Array BatchNorm::run(Scope& s, const Array& x, bool running) const {
  expect_floating("BatchNorm", s, x, 1);
  const std::int64_t feature_axis = axis < 0 ? axis + x.rank() : axis;
  if (feature_axis < 0 || feature_axis >= x.rank())
    throw ValueError(detail::str("BatchNorm at ", s.path_str(), ": axis ", axis,
                                 " is not an axis of ", x.aval()));
  Axes reduction, stat_shape;
  for (std::int64_t a = 0; a < x.rank(); ++a) {
    if (a != feature_axis) reduction.push_back(a);
    stat_shape.push_back(a == feature_axis ? x.shape()[a] : 1);
  }
  const Shape features{x.shape()[feature_axis]};
  const Array ra_mean = s.variable("batch_stats", "mean", [&] { return zeros(features); });
  const Array ra_var = s.variable("batch_stats", "var", [&] { return ones(features); });
  Array mu, var;
  // The statistics in x's dtype (float32 for float32 inputs, as Flax's); the running averages
  // keep their own.
  if (running) {
    mu = astype(ra_mean, x.dtype());
    var = astype(ra_var, x.dtype());
  } else {
    mu = mean(x, reduction);
    Array mu2 = mean(square(x), reduction);
    // Flax: axis_name's pmean of the stacked means (not while initialising).
    if (axis_name && !s.is_initializing()) {
      const Array pair[] = {mu, mu2};
      const Array both = dist::all_reduce(stack(pair), dist::ReduceOp::mean);
      const auto row = [&](std::int64_t k) {
        return reshape(slice(both, {{k, k + 1}}), mu.shape().dims());
      };
      mu = row(0);
      mu2 = row(1);
    }
    var = maximum(lax::zeros_like(mu), mu2 - square(mu));
    if (!s.is_initializing()) {
      const auto update = [&](const Array& running_value, const Array& batch) {
        return momentum * running_value + (1 - momentum) * astype(batch, running_value.dtype());
      };
      s.put_variable("batch_stats", "mean", update(ra_mean, mu));
      s.put_variable("batch_stats", "var", update(ra_var, var));
    }
  }
  return normalize(s, x, reshape(mu, stat_shape), reshape(var, stat_shape), epsilon, use_scale,
                   use_bias, param_dtype, scale_init, bias_init, feature_axis);
}

Array RMSNorm::operator()(Scope& s, const Array& x) const {
  expect_floating("RMSNorm", s, x, 1);
  // use_mean=False: the variance is E[x^2] and the mean zero.
  const Array var = mean(square(x), Axes{x.rank() - 1}, true);
  return normalize(s, x, lax::zeros_like(var), var, epsilon, use_scale, false, param_dtype,
                   scale_init, initializers::zeros(), x.rank() - 1);
}

Array GroupNorm::operator()(Scope& s, const Array& x) const {
  expect_floating("GroupNorm", s, x, 2);
  const std::int64_t channels = x.shape()[-1];
  if (num_groups.has_value() == group_size.has_value())
    throw ValueError(detail::str("GroupNorm at ", s.path_str(),
                                 ": give exactly one of num_groups and group_size (to give "
                                 "group_size, set num_groups to nullopt)"));
  if (group_size && (*group_size <= 0 || channels % *group_size != 0))
    throw ValueError(detail::str("GroupNorm at ", s.path_str(), ": the number of channels (",
                                 channels, ") is not a multiple of the group size (", *group_size,
                                 ")"));
  const std::int64_t groups = group_size ? channels / *group_size : *num_groups;
  if (groups <= 0 || channels % groups != 0)
    throw ValueError(detail::str("GroupNorm at ", s.path_str(), ": the number of groups (", groups,
                                 ") does not divide the number of channels (", channels, ")"));
  // Statistics per example and group over x reshaped to (..., groups, channels / groups).
  Axes grouped = x.shape().dims();
  grouped.back() = groups;
  grouped.push_back(channels / groups);
  const Array g = reshape(x, grouped);
  Axes axes;
  for (std::int64_t a = 1; a + 2 < g.rank(); ++a)
    axes.push_back(a);
  axes.push_back(g.rank() - 1);
  const Array mu = mean(g, axes, true), mu2 = mean(square(g), axes, true);
  const Array var = maximum(lax::zeros_like(mu), mu2 - square(mu));
  // jnp.repeat over the channels of each group, kept broadcastable over the other axes.
  Axes stat_shape(static_cast<std::size_t>(x.rank()), 1);
  stat_shape.front() = x.shape()[0];
  stat_shape.back() = channels;
  Axes repeated = mu.shape().dims();
  repeated.back() = channels / groups;
  const auto per_channel = [&](const Array& v) {
    return reshape(broadcast_to(v, Shape(repeated)), stat_shape);
  };
  return normalize(s, x, per_channel(mu), per_channel(var), epsilon, use_scale, use_bias,
                   param_dtype, scale_init, bias_init, x.rank() - 1);
}

}  // namespace flaxpp::nn
