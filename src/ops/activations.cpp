// jax.nn activations with JAX's formulas; relu carries jax.nn.relu's custom gradient.
#include "flaxpp/ops/activations.hpp"

#include <cmath>
#include <numbers>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/transforms/custom_vjp.hpp"

namespace flaxpp {

Array relu(const Array& x) {
  // jax.nn.relu: max(x, 0) (NaN-propagating) with gradient select(x > 0, g, 0).
  static const CustomVjpRule rule("relu", [](const ir::VjpArgs& a) {
    const Array& in = a.inputs[0];
    return std::vector<Array>{lax::select(lax::gt(in, lax::scalar(0.0, in.dtype())),
                                          a.cotangents[0], lax::zeros_like(a.cotangents[0]))};
  });
  const Array in[] = {x};
  return custom_vjp_call(
      rule,
      [](std::span<const Array> v) {
        return std::vector<Array>{lax::max(v[0], lax::scalar(0.0, v[0].dtype()))};
      },
      in)[0];
}

Array sigmoid(const Array& x) {
  return lax::logistic(x);
}

Array silu(const Array& x) {
  return x * sigmoid(x);
}

Array gelu(const Array& x, bool approximate) {
  if (approximate) {
    // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), as jax.nn.gelu writes it.
    const double sqrt_2_over_pi = std::sqrt(2.0 / std::numbers::pi);
    const Array cdf = 0.5 * (1.0 + tanh(sqrt_2_over_pi * (x + 0.044715 * power(x, 3))));
    return x * cdf;
  }
  return x * (lax::erf(x / std::numbers::sqrt2) + 1.0) / 2.0;
}

Array softmax(const Array& x, std::int64_t axis) {
  // jax.nn.softmax: exp(x - stop_gradient(max)) / sum, differentiated as written (JAX's custom
  // JVP for softmax is off by default, jax_softmax_custom_jvp=False).
  const Axes axes{static_cast<std::int64_t>(x.shape().normalize_axis(axis))};
  const Array unnormalized = exp(x - lax::stop_gradient(max(x, axes, true)));
  return unnormalized / sum(unnormalized, axes, true);
}

Array log_softmax(const Array& x, std::int64_t axis) {
  const Axes axes{static_cast<std::int64_t>(x.shape().normalize_axis(axis))};
  const Array shifted = x - lax::stop_gradient(max(x, axes, true));
  return shifted - log(sum(exp(shifted), axes, true));
}

Array logsumexp(const Array& x, std::optional<Axes> axes, bool keepdims) {
  // jax.nn.logsumexp: max(x) (finite entries only, 0 if none) shifts the exponentials.
  const Array inf = lax::scalar(INFINITY, x.dtype());
  const Array finite = lax::lt(lax::abs(x), inf);
  const Array amax0 =
      max(lax::stop_gradient(where(finite, x, lax::full_like(x, -INFINITY))), axes, true);
  const Array amax =
      lax::stop_gradient(where(lax::lt(lax::abs(amax0), inf), amax0, lax::zeros_like(amax0)));
  const Array out = log(sum(exp(x - amax), axes, true)) + amax;
  if (keepdims) return out;
  std::vector<std::int64_t> dims;
  const Axes reduced = axes ? *axes : Axes{};
  for (std::int64_t i = 0; i < x.rank(); ++i) {
    bool r = !axes;
    for (std::int64_t a : reduced)
      r = r || static_cast<std::int64_t>(x.shape().normalize_axis(a)) == i;
    if (!r) dims.push_back(x.shape().dims()[static_cast<std::size_t>(i)]);
  }
  return reshape(out, dims);
}

}  // namespace flaxpp
