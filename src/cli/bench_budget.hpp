// `flaxpp bench --budget-sweep`: the memory/time frontier of remat. For the benchmark MLP
// (depth 4, batch 128, width W, default 1024; each layer a region) and the language model with
// 8 scanned Blocks (bench_lm.hpp's, one region): the step under every named policy, then under
// memory budgets swept from the least feasible planned peak to the keep-everything one (the
// model's regions declared nothing_saveable). One JSON line per step: its median time, measured
// and planned peak, and for a budget what it chose and recomputes.
// python_compat/budget_frontier.py turns the lines into a table and a plot per model.
#pragma once

#include <cstdint>
#include <ostream>

namespace flaxpp::cli {

int bench_budget_sweep(std::int64_t width, std::int64_t steps, std::int64_t points,
                       std::ostream& out);

}  // namespace flaxpp::cli
