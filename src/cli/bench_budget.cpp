#include "cli/bench_budget.hpp"

#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/bench_common.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/ir/cost_model.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::cli {
namespace {

using MakeBench = std::function<StepBench(const PolicyPtr& policy)>;

// One line: the step timed (only its state and batch alive, so that the device's peak is the
// step's), with its plan.
io::Json measure(const std::string& model, StepBench b, std::int64_t budget, std::int64_t steps) {
  if (budget > 0) b.step.set_memory_budget(budget);
  const CompiledStep compiled = b.step.lower(b.state, b.x, b.y);
  const double ms = median_step_ms(steps, [&] { (void)b.step(b.state, b.x, b.y); });
  io::Json line{{"framework", "flaxpp"},
                {"backend", default_device().kind == DeviceKind::cpu ? "cpu" : "cuda"},
                {"model", model},
                {"steps", steps},
                {"step_ms", ms},
                {"peak_bytes", backend(default_device()).memory_stats().peak_bytes},
                {"planned_peak_bytes", compiled.memory_analysis().peak_bytes},
                {"modeled_ms", ir::modeled_seconds(compiled.graph(),
                                                   ir::CostModel::of(default_device().kind)) *
                                   1e3},
                {"constant_bytes", compiled.memory_analysis().constant_bytes}};
  if (const RematPlan* plan = compiled.remat_plan()) {
    line["budget_bytes"] = budget;
    io::Json chosen = io::Json::array();
    for (const RematPlan::Region& r : plan->regions)
      chosen.push_back(r.policy);
    line["chosen"] = chosen;
    line["recompute_flops"] = plan->recompute_flops;
    line["recompute_modeled_ms"] = plan->recompute_seconds() * 1e3;
    line["candidates"] = static_cast<std::int64_t>(plan->candidates);
    line["search_ms"] = plan->search_seconds * 1000.0;
  }
  return line;
}

void sweep(const std::string& model, const MakeBench& make, std::int64_t steps, std::int64_t points,
           std::ostream& out) {
  namespace cp = checkpoint_policies;
  // Budget -> the named policies whose own planned peak it is.
  std::map<std::int64_t, std::vector<std::string>> named_peaks;
  for (const char* name : {"none", "everything_saveable", "dots_saveable",
                           "dots_with_no_batch_dims_saveable", "nothing_saveable"}) {
    std::cerr << "bench: " << model << ", policy " << name << "\n";
    io::Json line = measure(model, make(cp::from_name(name)), 0, steps);
    line["policy"] = name;
    if (std::string(name) != "none")
      named_peaks[line["planned_peak_bytes"].get<std::int64_t>()].push_back(name);
    out << line.dump() << std::endl;
  }
  // The search space's ends, from a plan under a budget nothing exceeds.
  RematPlan ends;
  {
    StepBench b = make(cp::nothing_saveable());
    b.step.set_memory_budget(std::int64_t{1} << 60);
    ends = *b.step.lower(b.state, b.x, b.y).remat_plan();
  }
  // Each named policy's own peak (where the budget's choice must be at least as fast as the
  // policy), and budgets evenly spaced from the least to the keep-everything peak, but none
  // within 64 KiB of another (the MLP's peaks all lie within a few bytes).
  std::set<std::int64_t> budgets;
  for (const auto& [peak, names] : named_peaks)
    if (peak >= ends.least_peak_bytes) budgets.insert(peak);
  constexpr std::int64_t kApart = 64 << 10;
  for (std::int64_t i = 0; i < points; ++i) {
    const std::int64_t b =
        ends.least_peak_bytes + (ends.keep_all_peak_bytes - ends.least_peak_bytes) * i /
                                    std::max<std::int64_t>(points - 1, 1);
    const auto next = budgets.lower_bound(b);
    const bool near = (next != budgets.end() && *next - b < kApart) ||
                      (next != budgets.begin() && b - *std::prev(next) < kApart);
    if (!near) budgets.insert(b);
  }
  for (const std::int64_t budget : budgets) {
    std::cerr << "bench: " << model << ", budget " << budget << " bytes\n";
    io::Json line = measure(model, make(cp::nothing_saveable()), budget, steps);
    line["policy"] = "budget";
    if (const auto it = named_peaks.find(budget); it != named_peaks.end()) {
      io::Json at = io::Json::array();
      for (const std::string& n : it->second)
        at.push_back(n);
      line["at_peak_of"] = at;
    }
    out << line.dump() << std::endl;
  }
}

}  // namespace

int bench_budget_sweep(std::int64_t width, std::int64_t steps, std::int64_t points,
                       std::ostream& out) {
  sweep(
      "mlp", [width](const PolicyPtr& p) { return mlp_bench(width, 4, 128, p); }, steps, points,
      out);
  sweep(
      "lm8", [](const PolicyPtr& p) { return lm_bench(p, 8); }, steps, points, out);
  return 0;
}

}  // namespace flaxpp::cli
