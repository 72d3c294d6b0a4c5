// What the `flaxpp bench` benchmarks share: the benchmark MLP (depth Dense layers of width W,
// 10 classes), its random inputs and labels, and medians. Defined in bench_command.cpp.
#pragma once

#include <cstdint>
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

}  // namespace flaxpp::cli
