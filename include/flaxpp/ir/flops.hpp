// flaxpp/ir/flops.hpp — the arithmetic of a graph, counted before it runs: what a remat
// choice's recomputation costs (transforms/remat_plan.hpp).
#pragma once

#include <cstdint>
#include <span>

#include "flaxpp/ir/graph.hpp"

namespace flaxpp::ir {

// The graph's floating-point operations: what a primitive's FLOPs rule says (ir::register_flops:
// 2·M·N·K per product, a fused attention's products), one per element written for every other
// equation (a fused elementwise program: per instruction), so that data movement and elementwise work count by the elements they touch.
// A call's body counts once, a loop's body once per iteration (ir::loop_trips), and once for a
// loop whose length is only known as it runs (the figure is then a lower bound).
std::int64_t flops(const Graph& graph);
// The same for one equation `e` of `graph`.
std::int64_t eqn_flops(const Graph& graph, const Eqn& e);
// The same for an equation whose operands and results have these avals (as traced).
std::int64_t eqn_flops(const Eqn& e, std::span<const AVal> inputs, std::span<const AVal> outputs);

}  // namespace flaxpp::ir
