// What the `flaxpp bench` benchmarks share: the benchmark MLP (depth Dense layers of width W,
// 10 classes), its random inputs and labels, medians and the timing of steps. Defined in
// bench_command.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/nn/mlp.hpp"

namespace flaxpp::cli {

// Standard normal float32 values from std::mt19937(seed).
Array bench_inputs(const Shape& shape, std::uint32_t seed);
// Labels in [0, 10) from std::mt19937(seed).
Array bench_labels(std::int64_t rows, std::uint32_t seed);
// depth Dense layers: width features each, 10 for the last.
nn::MLP bench_mlp(std::int64_t width, std::int64_t depth, DType dtype);
double median(std::vector<double> v);
// The median time of `steps` calls of `step` (which must finish its work before returning),
// after three warm-up calls; the device's peak memory is reset before the timed calls.
double median_step_ms(std::int64_t steps, const std::function<void()>& step);

}  // namespace flaxpp::cli
