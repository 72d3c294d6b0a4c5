// The language model's step benchmark.
#include "cli/bench_lm.hpp"

#include <iostream>
#include <random>

#include "cli/bench_common.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/train/train_state.hpp"

namespace flaxpp::cli {
namespace {

constexpr std::int64_t kVocab = 64, kWidth = 64, kLayers = 4, kHeads = 4, kMlp = 256, kSeq = 64,
                       kBatch = 32;

// Token ids in [0, kVocab) from std::mt19937(seed).
Array bench_tokens(std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(kBatch * kSeq));
  for (auto& id : ids)
    id = static_cast<std::int32_t>(gen() % kVocab);
  return Array::from_vector(ids, Shape{kBatch, kSeq});
}

io::Json run(const std::string& policy_name, const std::string& attention, std::int64_t steps) {
  StepBench b = lm_bench(checkpoint_policies::from_name(policy_name), kLayers, attention);
  train::ClassifierStep& step = b.step;
  train::TrainState& state = b.state;
  const Array& x = b.x;
  const Array& y = b.y;
  // The step returns the loss as a float: the step has finished.
  const double ms = median_step_ms(steps, [&] { (void)step(state, x, y); });
  const std::int64_t peak_bytes = backend(default_device()).memory_stats().peak_bytes;
  const ir::OpCounts ops = ir::op_counts(step.lower(state, x, y).graph());
  return io::Json{{"framework", "flaxpp"},
                  {"backend", default_device().kind == DeviceKind::cpu ? "cpu" : "cuda"},
                  {"model", "lm"},
                  {"policy", policy_name},
                  {"attention", attention},
                  {"steps", steps},
                  {"step_ms", ms},
                  {"tokens_per_s", static_cast<double>(kBatch * kSeq) / (ms / 1000.0)},
                  {"peak_bytes", peak_bytes},
                  {"ops_per_step", ops.executed},
                  {"ops_per_step_unfused", ops.unfused}};
}

}  // namespace

StepBench lm_bench(const PolicyPtr& policy, std::int64_t layers, const std::string& attention) {
  const nn::Model lm(nn::LanguageModel{.vocab = kVocab,
                                       .features = kWidth,
                                       .num_layers = layers,
                                       .num_heads = kHeads,
                                       .mlp_dim = kMlp,
                                       .max_len = kSeq,
                                       .policy = policy,
                                       .attention_fn = nn::attention_fn_named(attention)});
  const Array x = bench_tokens(1);
  train::ClassifierStep step(
      [lm](const Tree& p, const Array& in) {
        return lm.apply(nn::Variables{{"params", p}}, in);
      },
      optim::sgd(0.01));
  train::TrainState state = step.init(lm.init(random::key(0), x)["params"]);
  return {std::move(step), std::move(state), x, bench_tokens(2)};
}

int bench_lm(std::int64_t steps, const std::string& attention, std::ostream& out) {
  for (const char* policy : {"none", "everything_saveable", "dots_saveable",
                             "dots_with_no_batch_dims_saveable", "nothing_saveable"}) {
    std::cerr << "bench: lm, policy " << policy << "\n";
    out << run(policy, attention, steps).dump() << std::endl;
  }
  return 0;
}

}  // namespace flaxpp::cli
