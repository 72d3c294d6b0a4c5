// assign_offsets: the arena's layout, greedy by size.
#include "flaxpp/transforms/buffer_assignment.hpp"

#include <algorithm>
#include <numeric>

namespace flaxpp {

PlannedArena assign_offsets(const std::vector<BufferLife>& buffers,
                            std::vector<std::int64_t>& offset) {
  const auto rounded = [](std::int64_t bytes) {
    return (bytes + BufferAssignment::kAlignment - 1) / BufferAssignment::kAlignment *
           BufferAssignment::kAlignment;
  };
  std::vector<std::size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  struct Range {
    std::int64_t begin;
    std::int64_t end;
  };
  PlannedArena arena;
  std::vector<std::size_t> placed;
  std::vector<Range> taken;
  for (const std::size_t b : order) {
    const BufferLife& life = buffers[b];
    const std::int64_t size = rounded(life.bytes);
    // The ranges of the placed buffers held at the same time, by offset.
    taken.clear();
    for (const std::size_t p : placed) {
      const BufferLife& other = buffers[p];
      if (other.first > life.last || life.first > other.last) continue;
      const std::int64_t at = offset[static_cast<std::size_t>(other.var)];
      taken.push_back({at, at + rounded(other.bytes)});
    }
    std::sort(taken.begin(), taken.end(),
              [](const Range& x, const Range& y) { return x.begin < y.begin; });
    // The smallest gap that fits, else the end of the ranges.
    std::int64_t best = -1;
    std::int64_t best_gap = 0;
    std::int64_t cursor = 0;
    for (const Range& r : taken) {
      const std::int64_t gap = r.begin - cursor;
      if (gap >= size && (best < 0 || gap < best_gap)) {
        best = cursor;
        best_gap = gap;
      }
      cursor = std::max(cursor, r.end);
    }
    if (best < 0) best = cursor;
    offset[static_cast<std::size_t>(life.var)] = best;
    arena.bytes = std::max(arena.bytes, best + size);
    arena.first = placed.empty() ? life.first : std::min(arena.first, life.first);
    arena.last = placed.empty() ? life.last : std::max(arena.last, life.last);
    placed.push_back(b);
  }
  return arena;
}

}  // namespace flaxpp
