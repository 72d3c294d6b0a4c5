// flaxpp/ir/cost_model.hpp — what a graph costs in time, modeled before it runs: XLA's cost
// analysis' figures per equation (flops, transcendentals, bytes accessed; HloCostAnalysis) and
// a roofline model of one device that turns them into seconds. The remat budget
// (flaxpp/transforms/remat_plan.hpp) chooses the candidate whose recomputation it finds
// cheapest.
#pragma once

#include <cstdint>
#include <span>

#include "flaxpp/core/device.hpp"
#include "flaxpp/ir/graph.hpp"

namespace flaxpp::ir {

// One equation's work.
struct Cost {
  std::int64_t flops = 0;            // ir::eqn_flops
  std::int64_t transcendentals = 0;  // elements written by transcendental operations (exp, tanh…)
  std::int64_t bytes = 0;            // operands read and results written
  Cost& operator+=(const Cost& o) {
    flops += o.flops;
    transcendentals += o.transcendentals;
    bytes += o.bytes;
    return *this;
  }
};
// The cost of an equation without a body, whose operands and results have these avals.
Cost eqn_cost(const Eqn& e, std::span<const AVal> inputs, std::span<const AVal> outputs);

// A device's rates. An equation takes
//   seconds_per_equation + max(flops / flops_per_second, bytes / bytes_per_second)
//                        + transcendentals / transcendentals_per_second,
// a loop its body's per iteration, a call its body's once; an equation holding several graphs
// (a cond's branches) counts every one, as ir::flops counts them.
struct CostModel {
  double flops_per_second = 0;
  double transcendentals_per_second = 0;
  double bytes_per_second = 0;
  double seconds_per_equation = 0;

  double seconds(const Cost& c) const;
  // Fixed figures, so that every run and every process of a job model alike (they choose the
  // same remat plan). The CPU's were measured on the development machine (a 2-core AMD EPYC
  // Zen 5 with AVX-512, docs/PERFORMANCE.md); the GPU's are an H100's datasheet, not measured.
  static CostModel of(DeviceKind kind);
};

// The modeled seconds of one equation of `graph`, and of the whole graph.
double eqn_seconds(const Graph& graph, const Eqn& e, const CostModel& model);
double modeled_seconds(const Graph& graph, const CostModel& model);
// The same for an equation whose operands and results have these avals (as traced).
double eqn_seconds(const Eqn& e, std::span<const AVal> inputs, std::span<const AVal> outputs,
                   const CostModel& model);

}  // namespace flaxpp::ir
