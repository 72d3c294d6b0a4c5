// The CUDA suites' shared checks: GPU results against the CPU backend's, element by element,
// with a tolerance in units of (|cpu| + 1) (0: bit-identical); inputs made on the CPU.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "harness/finite_diff.hpp"

namespace flaxpp::testing {

inline const bool kNoGpu = !is_available(DeviceKind::cuda);

// Values of any host-storable dtype as float64 (exact for every dtype but f64 itself).
inline std::vector<double> values(const Array& a) {
  return astype(a.to(Device::cpu()), DType::f64).to_vector<double>();
}

// f on CPU inputs and on the same inputs copied to the GPU: every element within
// rtol * (|cpu| + 1) (0: bit-identical), NaN where the CPU has NaN. Returns the largest
// deviation in those units.
inline double check_parity(const std::function<Array(std::span<const Array>)>& f,
                           const std::vector<Array>& cpu_inputs, double rtol) {
  std::vector<Array> gpu_inputs;
  for (const Array& x : cpu_inputs)
    gpu_inputs.push_back(x.to(Device::cuda(0)));
  const Array want = f(cpu_inputs);
  const Array got = f(gpu_inputs);
  CHECK(got.device() == Device::cuda(0));
  REQUIRE(got.aval() == want.aval());
  const std::vector<double> w = values(want), g = values(got);
  std::size_t bad = 0, first_bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (std::isfinite(w[i]) && std::isfinite(g[i]))
      worst = std::max(worst, std::abs(g[i] - w[i]) / (std::abs(w[i]) + 1.0));
    const bool ok =
        g[i] == w[i] || (std::isnan(w[i]) ? std::isnan(g[i])
                                          : std::abs(g[i] - w[i]) <= rtol * (std::abs(w[i]) + 1.0));
    if (!ok && bad++ == 0) first_bad = i;
  }
  CHECK_MESSAGE(bad == 0, bad << " of " << w.size() << " elements differ; first at " << first_bad
                              << ": cuda " << g[first_bad] << ", cpu " << w[first_bad]);
  return worst;
}

inline Array random_f32(const Shape& shape, unsigned seed) {
  return astype(random_f64(shape, seed, -2.0, 2.0), DType::f32);
}

// float32 -> bfloat16 -> float32, rounded to nearest-even (flaxpp's host conversion).
inline float round_to_bf16(float x) {
  const std::uint32_t bits = std::uint32_t{round_to_bfloat16_bits(x)} << 16;
  float out = 0;
  std::memcpy(&out, &bits, 4);
  return out;
}

}  // namespace flaxpp::testing
