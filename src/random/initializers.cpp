// jax.nn.initializers: fan computation, variance scaling and the named initialisers.
#include "flaxpp/random/initializers.hpp"

#include <cmath>
#include <span>

#include "flaxpp/random/distributions.hpp"

namespace flaxpp::initializers {
namespace {

// Elementwise f32 multiply by a scalar, as `array * jnp.array(s, float32)` in JAX.
Array scaled(const Array& x, float s) {
  std::vector<float> v = x.to_vector<float>();
  for (float& e : v)
    e *= s;
  return Array::from_vector(v, x.shape());
}

double axes_size(const Shape& shape, const Axes& axes) {
  double n = 1;
  for (std::int64_t a : axes)
    n *= static_cast<double>(shape.dims()[shape.normalize_axis(a)]);
  return n;
}

template <class Names, class E>
E parse_enum(std::string_view name, const Names& names, const char* what) {
  std::string accepted;
  for (const auto& [n, e] : names) {
    if (n == name) return e;
    accepted += detail::str(accepted.empty() ? "" : ", ", n);
  }
  throw ValueError(detail::str("invalid ", what, " \"", name, "\"; expected one of ", accepted));
}

}  // namespace

FanMode fan_mode_from_name(std::string_view name) {
  constexpr std::pair<std::string_view, FanMode> names[] = {{"fan_in", FanMode::fan_in},
                                                            {"fan_out", FanMode::fan_out},
                                                            {"fan_avg", FanMode::fan_avg},
                                                            {"fan_geo_avg", FanMode::fan_geo_avg}};
  return parse_enum<decltype(names), FanMode>(name, names, "mode for variance scaling initializer");
}

Distribution distribution_from_name(std::string_view name) {
  constexpr std::pair<std::string_view, Distribution> names[] = {
      {"truncated_normal", Distribution::truncated_normal},
      {"normal", Distribution::normal},
      {"uniform", Distribution::uniform}};
  return parse_enum<decltype(names), Distribution>(name, names,
                                                   "distribution for variance scaling initializer");
}

Fans compute_fans(const Shape& shape, const Axes& in_axis, const Axes& out_axis,
                  const Axes& batch_axis) {
  if (shape.rank() <= 1 && in_axis == Axes{-2})
    throw ValueError(detail::str("can't compute input and output sizes of a ", shape.rank(),
                                 "-dimensional weights tensor ", shape,
                                 " with the default in_axis; "
                                 "the shape must be at least 2-D, or give in_axis explicitly"));
  const double in_size = axes_size(shape, in_axis);
  const double out_size = axes_size(shape, out_axis);
  const double batch_size = axes_size(shape, batch_axis);
  if (in_size == 0 || out_size == 0 || batch_size == 0)
    throw ValueError(detail::str("can't compute fans of weights tensor ", shape,
                                 ": an input, output or batch size is 0"));
  const double receptive = static_cast<double>(shape.size()) / in_size / out_size / batch_size;
  return {in_size * receptive, out_size * receptive};
}

Initializer zeros() {
  return [](const random::Key&, const Shape& shape, DType dtype) {
    return Array::full(shape, 0.0, dtype);
  };
}

Initializer ones() {
  return [](const random::Key&, const Shape& shape, DType dtype) {
    return Array::full(shape, 1.0, dtype);
  };
}

Initializer constant(double value) {
  return [value](const random::Key&, const Shape& shape, DType dtype) {
    return Array::full(shape, value, dtype);
  };
}

Initializer normal(double stddev) {
  return [stddev](const random::Key& key, const Shape& shape, DType dtype) {
    return scaled(random::normal(key, shape, dtype), round_to_float32(stddev));
  };
}

Initializer uniform(double scale) {
  return [scale](const random::Key& key, const Shape& shape, DType dtype) {
    return scaled(random::uniform(key, shape, dtype), round_to_float32(scale));
  };
}

Initializer truncated_normal(double stddev, double lower, double upper) {
  return [=](const random::Key& key, const Shape& shape, DType dtype) {
    return scaled(random::truncated_normal(key, lower, upper, shape, dtype),
                  round_to_float32(stddev));
  };
}

Initializer variance_scaling(double scale, FanMode mode, Distribution distribution, Axes in_axis,
                             Axes out_axis, Axes batch_axis) {
  return [=](const random::Key& key, const Shape& shape, DType dtype) {
    const Fans fans = compute_fans(shape, in_axis, out_axis, batch_axis);
    double denominator = 0;
    switch (mode) {
      case FanMode::fan_in:
        denominator = fans.fan_in;
        break;
      case FanMode::fan_out:
        denominator = fans.fan_out;
        break;
      case FanMode::fan_avg:
        denominator = (fans.fan_in + fans.fan_out) / 2;
        break;
      case FanMode::fan_geo_avg:
        denominator = std::pow(fans.fan_in * fans.fan_out, 0.5);
        break;
    }
    // Python double arithmetic, then one rounding to float32 (jnp.array(..., dtype)); the rest
    // is float32 arithmetic as in JAX.
    const auto variance = round_to_float32(scale / denominator);
    switch (distribution) {
      case Distribution::truncated_normal: {
        // 0.87962566103423978 = stddev of N(0,1) truncated to (-2, 2).
        const float stddev = std::sqrt(variance) / static_cast<float>(0.87962566103423978);
        return scaled(random::truncated_normal(key, -2.0, 2.0, shape, dtype), stddev);
      }
      case Distribution::normal:
        return scaled(random::normal(key, shape, dtype), std::sqrt(variance));
      case Distribution::uniform:
        return scaled(random::uniform(key, shape, dtype, -1.0, 1.0), std::sqrt(3.0f * variance));
    }
    throw ValueError("variance_scaling: unknown distribution");
  };
}

Initializer lecun_normal(Axes i, Axes o, Axes b) {
  return variance_scaling(1.0, FanMode::fan_in, Distribution::truncated_normal, i, o, b);
}
Initializer lecun_uniform(Axes i, Axes o, Axes b) {
  return variance_scaling(1.0, FanMode::fan_in, Distribution::uniform, i, o, b);
}
Initializer glorot_normal(Axes i, Axes o, Axes b) {
  return variance_scaling(1.0, FanMode::fan_avg, Distribution::truncated_normal, i, o, b);
}
Initializer glorot_uniform(Axes i, Axes o, Axes b) {
  return variance_scaling(1.0, FanMode::fan_avg, Distribution::uniform, i, o, b);
}
Initializer he_normal(Axes i, Axes o, Axes b) {
  return variance_scaling(2.0, FanMode::fan_in, Distribution::truncated_normal, i, o, b);
}
Initializer he_uniform(Axes i, Axes o, Axes b) {
  return variance_scaling(2.0, FanMode::fan_in, Distribution::uniform, i, o, b);
}

}  // namespace flaxpp::initializers
