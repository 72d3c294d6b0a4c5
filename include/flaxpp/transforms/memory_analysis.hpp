// flaxpp/transforms/memory_analysis.hpp — what running a graph costs in memory, worked out
// before it runs, as jax.jit(f).lower(...).compile().memory_analysis() reports it: the
// arguments, the results, the results written into donated arguments' buffers, and the peak.
// It follows eval_graph's schedule and buffer reuse exactly (each value released after its
// last reader; a donating fused_elementwise writes into operands nothing else holds), so on
// the CPU the measured peak of a jitted step equals the prediction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "flaxpp/ir/graph.hpp"

namespace flaxpp {

struct MemoryAnalysis {
  std::int64_t argument_bytes = 0;  // the inputs, each variable once
  std::int64_t output_bytes = 0;    // the results, each variable once
  std::int64_t alias_bytes = 0;     // results written into donated inputs' buffers
  // The most the run holds at once, arguments included (JAX's peak_memory_in_bytes).
  std::int64_t peak_bytes = 0;
  // What the run needs beyond its arguments and new result buffers at its peak
  // (peak - arguments - outputs + aliases; JAX's temp_size_in_bytes).
  std::int64_t temp_bytes = 0;
  // (input, output): output `second` is written into donated input `first`'s buffer.
  std::vector<std::pair<std::size_t, std::size_t>> aliases;
  // False where the figure is not exact: a primitive's own temporaries are not modelled
  // (scan's per-iteration rows: the peak is then a lower bound), or a cond's largest branch
  // stands for whichever one runs.
  bool exact = true;

  std::string str() const;
};

// The memory of eval_graph(graph, args) where `donated[i]` says whether the graph owns input
// i (jit's donated arguments, freed after their last reader) or the caller keeps it.
MemoryAnalysis analyze_memory(const ir::Graph& graph, const std::vector<bool>& donated);

}  // namespace flaxpp
