// The budget search behind JitOptions::memory_budget (flaxpp/transforms/remat_plan.hpp says
// what it chooses among and how).
#pragma once

#include <cstdint>
#include <functional>

#include "flaxpp/ir/cost_model.hpp"
#include "flaxpp/ir/graph.hpp"
#include "flaxpp/transforms/memory_analysis.hpp"
#include "flaxpp/transforms/remat_plan.hpp"

namespace flaxpp::transforms {

struct LoweredStep {
  ir::Graph graph;  // after jit's passes
  MemoryAnalysis memory;
};
// Traces and plans the step; called once per candidate, under the candidate's RegionPolicies.
using LowerStep = std::function<LoweredStep()>;

// The candidate with the least recomputation time by `model` (remat_plan.hpp says how ties
// go) among those whose planned peak is at most `budget` bytes, and what was chosen in `plan`. A
// ValueError where no candidate fits: it names the least planned peak and what it is made of.
LoweredStep plan_remat(std::int64_t budget, const LowerStep& lower, const ir::CostModel& model,
                       RematPlan& plan);

}  // namespace flaxpp::transforms
