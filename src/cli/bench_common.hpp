// What the `flaxpp bench` benchmarks share: the benchmark MLP (depth Dense layers of width W,
// 10 classes), its random inputs and labels, the steps of the MLP and LM benchmarks, medians
// and the timing of steps. Defined in bench_command.cpp (lm_bench: bench_lm.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/train/train_state.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::cli {

// Standard normal float32 values from std::mt19937(seed).
Array bench_inputs(const Shape& shape, std::uint32_t seed);
// Labels in [0, 10) from std::mt19937(seed).
Array bench_labels(std::int64_t rows, std::uint32_t seed);
// depth Dense layers: width features each, 10 for the last.
nn::MLP bench_mlp(std::int64_t width, std::int64_t depth, DType dtype);
// A classifier's training step (SGD 0.01), its state and one batch.
struct StepBench {
  train::ClassifierStep step;
  train::TrainState state;
  Array x, y;
};
// The benchmark MLP under `policy` (each layer its own region), batch rows of bench_inputs.
StepBench mlp_bench(std::int64_t width, std::int64_t depth, std::int64_t batch,
                    const PolicyPtr& policy, DType dtype = DType::f32);
// The language model of `flaxpp bench --model lm` (bench_lm.hpp) with `layers` Blocks, each
// remat'd under `policy`, scanned, attending with nn::attention_fn_named(attention).
StepBench lm_bench(const PolicyPtr& policy, std::int64_t layers,
                   const std::string& attention = "flax");
double median(std::vector<double> v);
// The median time of `steps` calls of `step` (which must finish its work before returning),
// after three warm-up calls; the device's peak memory is reset before the timed calls.
double median_step_ms(std::int64_t steps, const std::function<void()>& step);

}  // namespace flaxpp::cli
