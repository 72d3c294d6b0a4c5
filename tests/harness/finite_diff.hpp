// The finite-difference gradient check every differentiable primitive and op plugs into:
// central differences in float64 against vjp, projected on a random cotangent so that any
// output shape reduces to one scalar per input element.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "flaxpp/transforms/autodiff.hpp"

namespace flaxpp::testing {

// Deterministic float64 values in [lo, hi).
inline Array random_f64(const Shape& shape, unsigned seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(shape.size()));
  for (double& x : v)
    x = dist(gen);
  return Array::from_vector(v, shape);
}

// Checks vjp(f) against central differences at `inputs` (all float64): for a random
// cotangent r, d/dx_i <r, f(x)> numerically vs the i-th input cotangent.
inline void check_grad(const ArrayFn& f, std::vector<Array> inputs, double eps = 1e-6,
                       double tol = 1e-6) {
  const VjpResult r = vjp(f, inputs);
  std::vector<Array> cts;
  unsigned seed = 1234;
  for (const Array& y : r.outputs)
    cts.push_back(random_f64(y.shape(), seed++));
  const std::vector<Array> grads = r.backward(cts);
  REQUIRE(grads.size() == inputs.size());
  auto projected = [&](const std::vector<Array>& xs) {
    const std::vector<Array> ys = f(xs);
    double total = 0;
    for (std::size_t k = 0; k < ys.size(); ++k) {
      if (!is_floating(ys[k].dtype())) continue;
      const auto y = ys[k].to_vector<double>();
      const auto c = cts[k].to_vector<double>();
      for (std::size_t j = 0; j < y.size(); ++j)
        total += y[j] * c[j];
    }
    return total;
  };
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!is_floating(inputs[i].dtype())) continue;
    const std::vector<double> x0 = inputs[i].to_vector<double>();
    const std::vector<double> g = grads[i].to_vector<double>();
    REQUIRE(g.size() == x0.size());
    for (std::size_t j = 0; j < x0.size(); ++j) {
      std::vector<double> xp = x0, xm = x0;
      xp[j] += eps;
      xm[j] -= eps;
      std::vector<Array> ip = inputs, im = inputs;
      ip[i] = Array::from_vector(xp, inputs[i].shape());
      im[i] = Array::from_vector(xm, inputs[i].shape());
      const double numeric = (projected(ip) - projected(im)) / (2 * eps);
      INFO("input ", i, " element ", j, ": vjp ", g[j], " vs finite difference ", numeric);
      CHECK(std::abs(g[j] - numeric) <= tol * (1.0 + std::abs(numeric)));
    }
  }
}

}  // namespace flaxpp::testing
