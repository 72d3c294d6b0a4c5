// `flaxpp bench [--grid default|large] [--out FILE.jsonl]`: MLP classifier training steps over a
// grid of width, depth, batch and remat policy; per configuration the median step time,
// samples/s, achieved FLOP/s, peak and residual bytes, the GEMM floor (the no-remat step's
// matrix products alone, through the same engine) and, on the CPU, the products' rate against
// the machine's float32 GEMM peak — one JSON line each, the schema that
// python_compat/bench_jax.py writes for JAX.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <random>

#include "cli/args.hpp"
#include "cli/bench_budget.hpp"
#include "cli/bench_common.hpp"
#include "cli/bench_cost_model.hpp"
#include "cli/bench_data_parallel.hpp"
#include "cli/bench_gemm_peak.hpp"
#include "cli/bench_lm.hpp"
#include "cli/commands.hpp"
#include "flaxpp/backend/cpu.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/nn/attention.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/losses.hpp"
#include "flaxpp/train/train_state.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "tools/mlp_apply.hpp"

namespace flaxpp::cli {
namespace {

constexpr const char* kBenchUsage =
    "usage: flaxpp bench [--grid default|large] [--width W] [--out FILE.jsonl] [--steps N]\n"
    "                    [--device D] [--dtype float32|bfloat16]\n"
    "       flaxpp bench --processes 1,2 [--width W] [--batch B] [--steps N] [--device D]\n"
    "                    [--out FILE.jsonl]\n"
    "       flaxpp bench --model lm [--attention flax|fused|xla] [--steps N] [--device D]\n"
    "                    [--out FILE.jsonl]\n"
    "       flaxpp bench --budget-sweep [--width W] [--points P] [--steps N] [--device D]\n"
    "                    [--out FILE.jsonl]\n"
    "       flaxpp bench --cost-model [--steps N] [--device D] [--out FILE.jsonl]\n"
    "  Times MLP classifier training steps (SGD) on the device (default: the default device,\n"
    "  FLAXPP_DEVICE, else the GPU if present, else the CPU) for each width, depth, batch and\n"
    "  remat policy of the grid (--width: only that width) and writes one JSON line per\n"
    "  configuration (median step time, samples/s, GFLOP/s, peak and residual bytes, GEMM\n"
    "  floor; on the CPU the products' rate against the machine's float32 GEMM peak, the\n"
    "  faster engine's at 1024^3, measured first). python_compat/bench_jax.py writes the same\n"
    "  lines for JAX; python_compat/bench_compare.py turns both into a table and plots.\n"
    "  --processes: data-parallel steps (SGD, depth 4, width W, default 512) as jobs of each\n"
    "  number of processes under mpirun, one product thread each, B rows per process (default\n"
    "  128); per job a JSON line with samples/s, scaling_efficiency (against the smallest job)\n"
    "  and comm_share (the step time spent in collectives).\n"
    "  --model lm: the language model of examples/lm.json (batch 32 of 64 tokens, SGD) under\n"
    "  each remat policy of its Blocks; python_compat/lm_speed.py compares it with JAX.\n"
    "  --attention: the Blocks' attention (model.attention of a train config; default flax).\n"
    "  --budget-sweep: the memory/time frontier of remat for the MLP (depth 4, batch 128, width\n"
    "  W, default 1024) and the LM with 8 scanned Blocks: each named policy, then P memory\n"
    "  budgets (default 8) from the least feasible planned peak to the keep-everything one; per\n"
    "  step its median time, measured and planned peak and, for a budget, what it chose.\n"
    "  python_compat/budget_frontier.py draws the frontier and writes its table.\n"
    "  --cost-model: the rates of the cost model the budget chooses by (products' FLOP/s,\n"
    "  transcendentals/s, bytes/s, seconds per equation), measured on the device from steps of\n"
    "  one equation, beside the built-in ones.\n"
    "  On the CPU, FLAXPP_CPU_GEMM=blas|onednn picks the engine of the float32 products; each\n"
    "  line names it (python_compat/bench_compare.py --engines compares runs of both).\n";

struct Config {
  std::int64_t width, depth, batch;
  std::string policy;
  DType dtype = DType::f32;  // the MLP's computation dtype (parameters stay float32)
};

using Clock = std::chrono::steady_clock;

// Layer (in, out) sizes of the benchmark MLP: depth Dense layers, width W, 10 classes.
std::vector<std::pair<std::int64_t, std::int64_t>> layers(const Config& c) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::int64_t l = 0; l < c.depth; ++l)
    out.emplace_back(c.width, l + 1 == c.depth ? 10 : c.width);
  return out;
}

// The no-remat step's matrix products alone: per layer the forward dot, the weight cotangent
// and (except for the first layer) the input cotangent; their median time and their FLOPs.
struct GemmFloor {
  double ms = -1;  // < 0: not measured yet
  double flops = 0;
};

GemmFloor gemm_floor(const Config& c, std::int64_t repeats) {
  std::vector<std::array<Array, 2>> operands;
  std::vector<ir::DotDimensionNumbers> dims;
  std::uint32_t seed = 7;
  const auto ls = layers(c);
  for (std::size_t l = 0; l < ls.size(); ++l) {
    const auto [in, out] = ls[l];
    auto operand = [&](const Shape& shape) { return astype(bench_inputs(shape, seed++), c.dtype); };
    operands.push_back({operand(Shape{c.batch, in}), operand(Shape{in, out})});
    dims.push_back({{1}, {0}, {}, {}});  // x @ W
    operands.push_back({operand(Shape{c.batch, in}), operand(Shape{c.batch, out})});
    dims.push_back({{0}, {0}, {}, {}});  // x^T @ g
    if (l > 0) {
      operands.push_back({operand(Shape{c.batch, out}), operand(Shape{in, out})});
      dims.push_back({{1}, {1}, {}, {}});  // g @ W^T
    }
  }
  std::vector<double> times;
  for (std::int64_t r = 0; r < repeats + 2; ++r) {
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < operands.size(); ++i)
      (void)lax::dot_general(operands[i][0], operands[i][1], dims[i]);
    backend(default_device()).synchronize();
    if (r >= 2)
      times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  double flops = 0;
  for (std::size_t l = 0; l < ls.size(); ++l)
    flops += (l > 0 ? 3.0 : 2.0) * 2.0 * static_cast<double>(c.batch * ls[l].first * ls[l].second);
  return {median(times), flops};
}

// One configuration's JSON line. `floor` caches the GEMM floor across the policies of one
// shape; it is measured after the steps, whose peak it must not touch. `peak` is the CPU's
// GEMM peak (nullopt on a GPU).
io::Json run(const Config& c, std::int64_t steps, GemmFloor& floor,
             const std::optional<GemmPeak>& peak) {
  const PolicyPtr policy = checkpoint_policies::from_name(c.policy);
  StepBench b = mlp_bench(c.width, c.depth, c.batch, policy, c.dtype);
  const train::ApplyFn apply = train::mlp_apply(bench_mlp(c.width, c.depth, c.dtype), policy);
  train::ClassifierStep& step = b.step;
  train::TrainState& state = b.state;
  const Array& x = b.x;
  const Array& y = b.y;

  // Residuals that are not arguments, from the residual report of the loss. (Scoped: its
  // copies of the initial parameters must not stay alive during the timed steps.)
  std::int64_t residual_bytes = 0;
  {
    const Tree structure = state.params;
    std::vector<Array> args = structure.leaves();
    const std::size_t n = args.size();
    args.push_back(x);
    const ArrayFn loss = [&](std::span<const Array> in) {
      return std::vector<Array>{mean(optim::softmax_cross_entropy_with_integer_labels(
          apply(structure.with_leaves(in.subspan(0, n)), in[n]), y))};
    };
    for (const SavedResidual& r : saved_residuals(loss, args))
      if (r.kind != SavedResidual::Kind::argument && r.kind != SavedResidual::Kind::constant)
        residual_bytes += r.aval.nbytes();
  }

  // The step returns the loss as a float: the step has finished.
  const double ms = median_step_ms(steps, [&] { (void)step(state, x, y); });
  // The peak of the timed steps, read before the GEMM floor allocates its own operands.
  const std::int64_t peak_bytes = backend(default_device()).memory_stats().peak_bytes;
  double flops = 0;
  for (const auto& [in, out] : layers(c))
    flops += 6.0 * static_cast<double>(c.batch * in * out);
  // The compiled step: its primitives executed per step, and its memory plan.
  const CompiledStep compiled = step.lower(state, x, y);
  if (floor.ms < 0) floor = gemm_floor(c, steps);
  io::Json line{{"framework", "flaxpp"},
                {"backend", default_device().kind == DeviceKind::cpu ? "cpu" : "cuda"},
                {"width", c.width},
                {"depth", c.depth},
                {"batch", c.batch},
                {"dtype", std::string(dtype_name(c.dtype))},
                {"policy", c.policy},
                {"steps", steps},
                {"step_ms", ms},
                {"samples_per_s", static_cast<double>(c.batch) / (ms / 1000.0)},
                {"gflops", flops / (ms / 1000.0) / 1e9},
                {"peak_bytes", peak_bytes},
                {"residual_bytes", residual_bytes},
                {"predicted_peak_bytes", compiled.memory_analysis().peak_bytes},
                {"ops_per_step", ir::op_counts(compiled.graph()).executed},
                {"ops_per_step_unfused", ir::op_counts(compiled.graph()).unfused},
                {"cuda_graph_replays", step.replays()},
                {"gemm_floor_ms", floor.ms},
                {"step_over_floor", ms / floor.ms}};
  if (peak) {
    const double product_gflops = floor.flops / (floor.ms / 1000.0) / 1e9;
    line["product_gflops"] = product_gflops;
    line["machine_peak_gflops"] = peak->gflops;
    line["machine_peak_engine"] = peak->engine;
    line["product_over_peak"] = product_gflops / peak->gflops;
    line["gemm_engine"] = std::string(cpu::gemm_engine_name(cpu::gemm_engine()));
  }
  return line;
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double median_step_ms(std::int64_t steps, const std::function<void()>& step) {
  for (int i = 0; i < 3; ++i)
    step();  // warm-up (the first traces)
  Backend& dev = backend(default_device());
  dev.synchronize();
  dev.reset_peak_memory();
  std::vector<double> times;
  for (std::int64_t i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    step();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return median(times);
}

Array bench_inputs(const Shape& shape, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(shape.size()));
  for (float& x : v)
    x = dist(gen);
  return Array::from_vector(v, shape);
}

Array bench_labels(std::int64_t rows, std::uint32_t seed) {
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  std::mt19937 gen(seed);
  for (auto& y : labels)
    y = static_cast<std::int32_t>(gen() % 10);
  return Array::from_vector(labels, Shape{rows});
}

nn::MLP bench_mlp(std::int64_t width, std::int64_t depth, DType dtype) {
  std::vector<std::int64_t> features(static_cast<std::size_t>(depth), width);
  features.back() = 10;
  return {.features = features, .dtype = dtype};
}

StepBench mlp_bench(std::int64_t width, std::int64_t depth, std::int64_t batch,
                    const PolicyPtr& policy, DType dtype) {
  const nn::MLP mlp = bench_mlp(width, depth, dtype);
  const Array x = bench_inputs(Shape{batch, width}, 1);
  train::ClassifierStep step(train::mlp_apply(mlp, policy), optim::sgd(0.01));
  train::TrainState state = step.init(nn::Model(mlp).init(random::key(0), x)["params"]);
  return {std::move(step), std::move(state), x, bench_labels(batch, 2)};
}

int bench_command(const std::vector<std::string>& args) {
  std::string grid = "default", out_path, model = "mlp", attention = "flax";
  std::int64_t steps = 20, only_width = 0;
  DType dtype = DType::f32;
  DataParallelBench data_parallel;
  bool worker = false, budget_sweep = false, cost_model = false;
  std::int64_t points = 8;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << kBenchUsage;
      return 0;
    } else if (args[i] == "--grid" && i + 1 < args.size()) {
      grid = args[++i];
    } else if (args[i] == "--out" && i + 1 < args.size()) {
      out_path = args[++i];
    } else if (args[i] == "--width" && i + 1 < args.size()) {
      only_width = parse_int_option("--width", args[++i], 1, 1 << 20);
    } else if (args[i] == "--dtype" && i + 1 < args.size()) {
      const std::string name = args[++i];
      if (name != "float32" && name != "bfloat16") {
        std::cerr << "flaxpp bench: --dtype is float32 or bfloat16, got " << name << "\n";
        return 2;
      }
      dtype = name == "float32" ? DType::f32 : DType::bf16;
    } else if (args[i] == "--device" && i + 1 < args.size()) {
      data_parallel.device = args[++i];
      set_default_device(Device::parse(*data_parallel.device));
    } else if (args[i] == "--model") {
      model = option_value(args, i);
      if (model != "mlp" && model != "lm") {
        std::cerr << "flaxpp bench: --model is mlp or lm, got " << model << "\n";
        return 2;
      }
    } else if (args[i] == "--attention") {
      attention = option_value(args, i);
      try {
        (void)nn::attention_fn_named(attention);
      } catch (const ValueError& e) {
        std::cerr << "flaxpp bench: --attention: " << e.what() << "\n";
        return 2;
      }
    } else if (args[i] == "--budget-sweep") {
      budget_sweep = true;
    } else if (args[i] == "--cost-model") {
      cost_model = true;
    } else if (args[i] == "--points") {
      points = parse_int_option("--points", option_value(args, i), 2, 1000);
    } else if (args[i] == "--processes") {
      data_parallel.processes = parse_process_counts(option_value(args, i));
    } else if (args[i] == "--batch") {
      data_parallel.batch = parse_int_option("--batch", option_value(args, i), 1, 1 << 24);
    } else if (args[i] == "--data-parallel-worker") {
      worker = true;  // a process of a job that bench --processes started
    } else if (args[i] == "--steps" && i + 1 < args.size()) {
      steps = parse_int_option("--steps", args[++i], 1, 1'000'000);
    } else {
      std::cerr << "flaxpp bench: unknown argument " << args[i] << "\n" << kBenchUsage;
      return 2;
    }
  }
  if (only_width != 0) data_parallel.width = only_width;
  data_parallel.steps = steps;
  if (worker) return bench_data_parallel_worker(data_parallel);
  // The other modes write their lines to the --out file, or to stdout without one.
  const auto to_out = [&out_path](const std::function<int(std::ostream&)>& write) {
    if (out_path.empty()) return write(std::cout);
    std::ofstream file(out_path);
    return write(file);
  };
  if (!data_parallel.processes.empty())
    return to_out([&](std::ostream& out) { return bench_processes(data_parallel, out); });
  if (cost_model) return to_out([&](std::ostream& out) { return bench_cost_model(steps, out); });
  if (budget_sweep)
    return to_out([&](std::ostream& out) {
      return bench_budget_sweep(only_width != 0 ? only_width : 1024, steps, points, out);
    });
  if (model == "lm")
    return to_out([&](std::ostream& out) { return bench_lm(steps, attention, out); });
  if (dtype == DType::bf16 && default_device().kind == DeviceKind::cpu) {
    std::cerr << "flaxpp bench: --dtype bfloat16 needs a GPU (the CPU backend computes in "
                 "float32 and float64); use --device cuda on a machine with one\n";
    return 2;
  }
  if (grid != "default" && grid != "large") {
    std::cerr << "flaxpp bench: --grid is default or large, got " << grid << "\n";
    return 2;
  }
  std::vector<std::int64_t> widths{64, 256, 512, 1024}, batches{128};
  if (grid == "large") {
    widths.insert(widths.end(), {2048, 4096});
    batches.push_back(512);
  }
  std::ofstream file;
  if (!out_path.empty()) file.open(out_path);
  std::ostream& out = out_path.empty() ? std::cout : file;
  std::optional<GemmPeak> peak;
  if (default_device().kind == DeviceKind::cpu) {
    peak = measure_cpu_gemm_peak(10);
    std::cerr << "bench: the machine's float32 GEMM peak (1024^3):";
    for (const auto& [engine, gflops] : peak->engines)
      std::cerr << " " << engine << " " << static_cast<int>(gflops) << " GFLOP/s";
    std::cerr << "\n";
  }
  for (std::int64_t batch : batches)
    for (std::int64_t width : widths) {
      if (only_width != 0 && width != only_width) continue;
      GemmFloor floor;  // the same for every policy
      for (const char* policy : {"none", "dots_with_no_batch_dims_saveable", "nothing_saveable"}) {
        std::cerr << "bench: width " << width << " depth 4 batch " << batch << " policy " << policy
                  << "\n";
        out << run({width, 4, batch, policy, dtype}, steps, floor, peak).dump() << std::endl;
      }
    }
  return 0;
}

}  // namespace flaxpp::cli
