// flaxpp/transforms/buffer_assignment.hpp — where a jitted step's values live, decided before
// it runs: its temporaries at fixed offsets of arenas (XLA's buffer assignment), the rest
// (arguments, results, what loops and collectives hold) in buffers of their own. The step's
// executor (eval_graph with a BufferAssignment) and its CUDA-graph recording follow it, so the
// planned peak (plan_memory) is what the allocator counts.
#pragma once

#include <cstdint>
#include <vector>

#include "flaxpp/ir/graph.hpp"

namespace flaxpp {

// One arena: its bytes, and the equations from whose start to whose end it is held.
struct PlannedArena {
  std::int64_t bytes = 0;
  std::ptrdiff_t first = -1;
  std::ptrdiff_t last = -1;
};

struct BufferAssignment {
  // Slots start at multiples of this many bytes (vector loads, cuBLAS's 256-byte alignment).
  static constexpr std::int64_t kAlignment = 256;

  // The arenas, in order; their spans of equations do not overlap, so one is held at a time
  // (none: the step places nothing in an arena). A step whose loops would hold one arena whole
  // while they run has one arena before each loop and one after, where that lowers the peak.
  std::vector<PlannedArena> arenas;
  // Per variable of the graph: the variable whose buffer it is (itself, or the operand whose
  // buffer a donating fused_elementwise wrote it into, followed to the first).
  std::vector<ir::VarId> buffer_of;
  // Per variable owning its buffer (buffer_of[v] == v): its offset in the arena held when it is
  // made, or -1 where its buffer is not an arena's (arguments, results, a loop's or a
  // collective's values, a value held across a loop between two arenas).
  std::vector<std::int64_t> offset;

  bool empty() const { return arenas.empty(); }
  // The arena offset of the buffer variable `v` is in, or -1.
  std::int64_t offset_of(ir::VarId v) const {
    return offset[static_cast<std::size_t>(buffer_of[static_cast<std::size_t>(v)])];
  }
};

// A buffer of the run: `bytes`, held from the start of equation `first` (-1: before the first)
// to the end of equation `last`.
struct BufferLife {
  ir::VarId var = -1;
  std::int64_t bytes = 0;
  std::ptrdiff_t first = -1;
  std::ptrdiff_t last = -1;
};

// Offsets for `buffers` in one arena such that two buffers held during a common equation never
// overlap: the largest first, each in the smallest gap it fits among those placed already
// (TFLite's greedy-by-size). Writes `offset[b.var]` of each buffer and returns the arena (its
// size and equations; empty without buffers).
PlannedArena assign_offsets(const std::vector<BufferLife>& buffers,
                            std::vector<std::int64_t>& offset);

}  // namespace flaxpp
