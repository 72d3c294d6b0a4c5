// nn.RMSNorm and nn.GroupNorm: Flax's _compute_stats and _normalize, step by step.
#include "flaxpp/nn/normalization.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::nn {
namespace {

using Axes = std::vector<std::int64_t>;

// Flax's _normalize with the statistics already broadcastable to x: (x - mean) times
// rsqrt(var + epsilon) (times scale), plus bias, the parameters of x's last axis.
Array normalize(Scope& s, const Array& x, const Array& mean, const Array& var, double epsilon,
                bool use_scale, bool use_bias, DType param_dtype,
                const initializers::Initializer& scale_init,
                const initializers::Initializer& bias_init) {
  const Shape features{x.shape()[-1]};
  Array y = x - mean;
  Array mul = lax::rsqrt(var + epsilon);
  if (use_scale) mul = mul * s.param("scale", scale_init, features, param_dtype);
  y = y * mul;
  if (use_bias) y = y + s.param("bias", bias_init, features, param_dtype);
  return y;
}

void expect_floating(const char* module, const Scope& s, const Array& x, std::int64_t rank) {
  if (!is_floating(x.dtype()) || x.rank() < rank)
    throw ValueError(detail::str(module, " at ", s.path_str(), ": expected a floating input of ",
                                 rank, " or more axes, got ", x.aval()));
}

}  // namespace

Array RMSNorm::operator()(Scope& s, const Array& x) const {
  expect_floating("RMSNorm", s, x, 1);
  // use_mean=False: the variance is E[x^2] and the mean zero.
  const Array var = mean(square(x), Axes{x.rank() - 1}, true);
  return normalize(s, x, lax::zeros_like(var), var, epsilon, use_scale, false, param_dtype,
                   scale_init, initializers::zeros());
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
                   param_dtype, scale_init, bias_init);
}

}  // namespace flaxpp::nn
