// flaxpp/transforms/memory_analysis.hpp — what running a graph costs in memory, worked out
// before it runs, as jax.jit(f).lower(...).compile().memory_analysis() reports it: the
// arguments, the results, the results written into donated arguments' buffers, and the peak.
// It follows eval_graph's schedule and buffer reuse exactly (each value released after its
// last reader; a donating fused_elementwise writes into operands nothing else holds; a scan's
// iterations through its memory model). A jitted step's analysis (plan_memory) is also its
// plan: the buffer assignment its run executes, so on the CPU the measured peak of a jitted
// step equals the prediction. The peak counts what the backend's allocator hands out for
// values, and a jitted step's constants and literals; the libraries' own scratch (BLAS, oneDNN's
// reorders, cuBLAS/cuDNN workspaces) is not in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "flaxpp/ir/graph.hpp"
#include "flaxpp/transforms/buffer_assignment.hpp"

namespace flaxpp {

struct MemoryAnalysis {
  std::int64_t argument_bytes = 0;  // the inputs, each variable once
  std::int64_t output_bytes = 0;    // the results, each variable once
  std::int64_t alias_bytes = 0;     // results written into donated inputs' buffers
  // The graph's constants and literals (scalars such as a learning rate), held with the step
  // and live throughout its runs; a jitted step's peak counts them (count_constants).
  std::int64_t constant_bytes = 0;
  // The most the run holds at once, arguments included (JAX's peak_memory_in_bytes).
  std::int64_t peak_bytes = 0;
  // What the run needs beyond its arguments and new result buffers at its peak
  // (peak - arguments - outputs + aliases; JAX's temp_size_in_bytes).
  std::int64_t temp_bytes = 0;
  // (input, output): output `second` is written into donated input `first`'s buffer.
  std::vector<std::pair<std::size_t, std::size_t>> aliases;
  // What the run holds once it has returned: the arguments its caller keeps, and its results
  // (each buffer once). A donated argument that is not a result is released by then.
  std::int64_t end_bytes = 0;
  // For each result: the input whose buffer it is (passed through, or written into a donated
  // input's buffer), or -1 for a buffer of the run's own (also for a literal).
  std::vector<std::ptrdiff_t> output_origin;
  // plan_memory's: where the step's temporaries live (empty from analyze_memory).
  BufferAssignment buffers;
  // plan_memory's, for each result: whether it is written where the caller puts it (its
  // `placed` request, granted where an equation allocates the result), and so holds none of
  // the run's memory (its bytes are in no figure here).
  std::vector<bool> placed_outputs;
  // False where the figure is not exact: a primitive's own temporaries are not modelled (a loop
  // without a memory model: the peak is then a lower bound), or a cond's largest branch stands
  // for whichever one runs.
  bool exact = true;

  // What the peak counts that is live before a call: the arguments and the constants. A
  // call's high-water mark above what was live before it is peak_bytes - resident_bytes().
  std::int64_t resident_bytes() const { return argument_bytes + constant_bytes; }

  std::string str() const;
};

// The memory of eval_graph(graph, args) where `donated[i]` says whether the graph owns input
// i (jit's donated arguments, freed after their last reader) or the caller keeps it.
MemoryAnalysis analyze_memory(const ir::Graph& graph, const std::vector<bool>& donated);
// The memory of a jitted step: eval_graph(graph, args, m.buffers) with the run's temporaries
// at offsets of arenas (m.buffers): one for the run, or one between each two loops (the values
// held across a loop kept apart) where that peaks lower. Each is held from the first equation
// that makes a value in it to the end of the last that reads one, and the peak counts it whole
// over that span, as XLA counts its temp allocation, beside the arguments, results and what
// the other equations hold.
// `placed[k]` asks for result k to be written where the caller puts it (eval_graph's
// destinations: a loop's row of its stacked results); m.placed_outputs says where it is.
MemoryAnalysis plan_memory(const ir::Graph& graph, const std::vector<bool>& donated,
                           const std::vector<bool>& placed = {});
// Adds `graph`'s constants and literals (those of its loop bodies included) to `m`'s peak: a
// jitted step's, which holds them from its compilation on. A loop body's analysis leaves them
// out, since the step that holds the loop counts them once.
void count_constants(MemoryAnalysis& m, const ir::Graph& graph);

// A primitive's memory model: what evaluating one of its equations holds beyond what its
// caller holds (its operands included there), for a primitive whose evaluation allocates more
// than its results, e.g. a loop's per-iteration rows and carries (scan registers one). The
// analysis then follows it exactly; without one, a loop's figure is a lower bound.
struct EqnMemory {
  std::int64_t peak = 0;     // the most held at once while it runs, its results included
  std::int64_t results = 0;  // what its results hold when it returns
  bool exact = true;
};
// `e` is an equation of `graph` (whose avals it may read).
using MemoryModel = std::function<EqnMemory(const ir::Graph& graph, const ir::Eqn& e)>;
void register_memory_model(const ir::Primitive& prim, MemoryModel model);

}  // namespace flaxpp
