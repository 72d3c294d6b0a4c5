// flaxpp/random/initializers.hpp — the jax.nn.initializers family (Flax re-exports them).
// Each factory returns an Initializer, called as init(key, shape, dtype), with JAX's
// defaults and numerics (semantics doc §2).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/random/key.hpp"

namespace flaxpp::initializers {

using Initializer = std::function<Array(const random::Key& key, const Shape& shape, DType dtype)>;

// A set of axes, as JAX's in_axis / out_axis / batch_axis take an int or a sequence.
using Axes = std::vector<std::int64_t>;

enum class FanMode { fan_in, fan_out, fan_avg, fan_geo_avg };
enum class Distribution { truncated_normal, normal, uniform };
// "fan_in", … / "truncated_normal", …; throw ValueError listing the accepted names.
FanMode fan_mode_from_name(std::string_view name);
Distribution distribution_from_name(std::string_view name);

// jax.nn.initializers._compute_fans: (fan_in, fan_out) of a weight shape; axes not in any
// list are the receptive field. Computed in double, as Python does.
struct Fans {
  double fan_in, fan_out;
};
Fans compute_fans(const Shape& shape, const Axes& in_axis = {-2}, const Axes& out_axis = {-1},
                  const Axes& batch_axis = {});

Initializer zeros();
Initializer ones();
Initializer constant(double value);
// N(0, stddev²).
Initializer normal(double stddev = 1e-2);
// U[0, scale).
Initializer uniform(double scale = 1e-2);
// stddev · N(0,1) truncated to (lower, upper); no variance correction (as JAX).
Initializer truncated_normal(double stddev = 1e-2, double lower = -2.0, double upper = 2.0);

Initializer variance_scaling(double scale, FanMode mode, Distribution distribution,
                             Axes in_axis = {-2}, Axes out_axis = {-1}, Axes batch_axis = {});
Initializer lecun_normal(Axes in_axis = {-2}, Axes out_axis = {-1}, Axes batch_axis = {});
Initializer lecun_uniform(Axes in_axis = {-2}, Axes out_axis = {-1}, Axes batch_axis = {});
Initializer glorot_normal(Axes in_axis = {-2}, Axes out_axis = {-1}, Axes batch_axis = {});
Initializer glorot_uniform(Axes in_axis = {-2}, Axes out_axis = {-1}, Axes batch_axis = {});
Initializer he_normal(Axes in_axis = {-2}, Axes out_axis = {-1}, Axes batch_axis = {});
Initializer he_uniform(Axes in_axis = {-2}, Axes out_axis = {-1}, Axes batch_axis = {});
inline Initializer xavier_normal(Axes i = {-2}, Axes o = {-1}, Axes b = {}) {
  return glorot_normal(i, o, b);
}
inline Initializer xavier_uniform(Axes i = {-2}, Axes o = {-1}, Axes b = {}) {
  return glorot_uniform(i, o, b);
}
inline Initializer kaiming_normal(Axes i = {-2}, Axes o = {-1}, Axes b = {}) {
  return he_normal(i, o, b);
}
inline Initializer kaiming_uniform(Axes i = {-2}, Axes o = {-1}, Axes b = {}) {
  return he_uniform(i, o, b);
}

}  // namespace flaxpp::initializers
