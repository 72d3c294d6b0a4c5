// `flaxpp bench --cost-model`: measures the four rates of ir::CostModel on this machine's
// default device, each from jitted steps of one equation timed alone, and prints them beside
// the built-in figures the remat budget chooses by (CostModel::of). One JSON line.
#pragma once

#include <cstdint>
#include <ostream>

namespace flaxpp::cli {

int bench_cost_model(std::int64_t steps, std::ostream& out);

}  // namespace flaxpp::cli
