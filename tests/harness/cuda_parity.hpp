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

// Every element of `got` within rtol * (|want| + 1) of `want` (0: equal), NaN where `want` has
// NaN. Returns the largest deviation in those units.
inline double check_close(const std::vector<double>& got, const std::vector<double>& want,
                          double rtol) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first_bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double w = want[i], g = got[i];
    if (std::isfinite(w) && std::isfinite(g))
      worst = std::max(worst, std::abs(g - w) / (std::abs(w) + 1.0));
    const bool ok =
        g == w || (std::isnan(w) ? std::isnan(g) : std::abs(g - w) <= rtol * (std::abs(w) + 1.0));
    if (!ok && bad++ == 0) first_bad = i;
  }
  CHECK_MESSAGE(bad == 0, bad << " of " << want.size() << " elements differ; first at "
                              << first_bad << ": cuda " << got[first_bad] << ", reference "
                              << want[first_bad]);
  return worst;
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
  return check_close(values(got), values(want), rtol);
}

// f on the inputs copied to the GPU against f on the same values in float64 on the CPU: for
// long float32 sums, whose CPU order (one running sum) is less accurate than the GPU's tree,
// the float64 sum is the reference both approximate.
inline double check_against_f64(const std::function<Array(std::span<const Array>)>& f,
                                const std::vector<Array>& cpu_inputs, double rtol) {
  std::vector<Array> gpu_inputs, wide_inputs;
  for (const Array& x : cpu_inputs) {
    gpu_inputs.push_back(x.to(Device::cuda(0)));
    wide_inputs.push_back(astype(x, DType::f64));
  }
  return check_close(values(f(gpu_inputs)), values(f(wide_inputs)), rtol);
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
