// kernels/launch_geometry.hpp — how flaxpp's CUDA kernels are laid out over the GPU: block
// sizes, grid sizes and the split of long reductions into chunks. Plain C++ (compiled by g++
// too), so the CPU tests check every rule here without a GPU. Every choice depends on the
// problem's shape only, never on the device, so a reduction adds its terms in the same order
// on every GPU: results are deterministic and the same from one device to the next.
#pragma once

#include <cstdint>

namespace flaxpp::kernels {

inline constexpr int kBlockThreads = 256;
inline constexpr int kWarpThreads = 32;
// The most blocks of a grid-stride loop: enough to fill an H100/H200 (132 SMs, 2048 threads
// each: 1056 blocks of 256) many times over; more only adds scheduling.
inline constexpr std::int64_t kMaxGridBlocks = 65536;
// gridDim.y and gridDim.z are at most this.
inline constexpr std::int64_t kMaxGridY = 65535;

// Blocks for a grid-stride loop over n elements (at least 1).
inline unsigned grid_blocks(std::int64_t n) {
  const std::int64_t blocks = (n + kBlockThreads - 1) / kBlockThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxGridBlocks ? kMaxGridBlocks : blocks));
}

// ---- reductions -------------------------------------------------------------------------
// A reduction that yields fewer partial results than the GPU has block slots is split: each
// block reduces a chunk into a partial result, and a second launch combines the partials of
// each output in a fixed order. Chunks are at least kMinChunk elements (below that a block's
// fixed costs dominate), and a reduction is split into at most about kTargetBlocks blocks.
inline constexpr std::int64_t kTargetBlocks = 1024;
inline constexpr std::int64_t kMinChunk = 4096;

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// A (rows, cols) row-major array reduced along cols.
struct RowReducePlan {
  enum class Kind {
    warp_per_row,   // cols <= kWarpRowMaxCols: each warp takes a row (8 rows per block)
    block_per_row,  // one block per row, grid-stride over rows
    split,          // few long rows: (chunks, rows) blocks write partials, then block_per_row
  };
  Kind kind;
  unsigned blocks;      // warp_per_row, block_per_row: grid size
  std::int64_t chunks;  // split: chunks per row (gridDim.x); rows is gridDim.y
  std::int64_t chunk;   // split: elements per chunk (the last one may be shorter)
};
inline constexpr std::int64_t kWarpRowMaxCols = 1024;

inline RowReducePlan plan_row_reduce(std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t kWarpsPerBlock = kBlockThreads / kWarpThreads;
  if (cols <= kWarpRowMaxCols) {
    const std::int64_t blocks = ceil_div(rows, kWarpsPerBlock);
    return {RowReducePlan::Kind::warp_per_row,
            static_cast<unsigned>(blocks > kMaxGridBlocks ? kMaxGridBlocks : blocks), 0, 0};
  }
  // Split only where rows alone leave most of the GPU idle and each row is long enough.
  std::int64_t chunks = ceil_div(kTargetBlocks, rows);
  const std::int64_t by_length = cols / kMinChunk;
  if (chunks > by_length) chunks = by_length;
  if (rows > kMaxGridY || chunks < 2) {
    return {RowReducePlan::Kind::block_per_row,
            static_cast<unsigned>(rows > kMaxGridBlocks ? kMaxGridBlocks : rows), 0, 0};
  }
  const std::int64_t chunk = ceil_div(cols, chunks);
  return {RowReducePlan::Kind::split, 0, ceil_div(cols, chunk), chunk};
}

// A (rows, cols) row-major array reduced along rows: blocks of kColumns adjacent columns
// (coalesced reads) by kRowLanes lanes, each lane striding over its chunk of rows. With more
// than one chunk, a second launch sums the (chunks, cols) partials the same way.
inline constexpr int kColumns = 32;
inline constexpr int kRowLanes = 8;
struct ColumnReducePlan {
  std::int64_t column_blocks;   // gridDim.x
  std::int64_t chunks;          // gridDim.y
  std::int64_t rows_per_chunk;  // the last chunk may be shorter
};

inline ColumnReducePlan plan_column_reduce(std::int64_t rows, std::int64_t cols) {
  const std::int64_t column_blocks = ceil_div(cols, kColumns);
  std::int64_t chunks = ceil_div(kTargetBlocks, column_blocks);
  // Each block reads at least kMinChunk elements (rows_per_chunk * kColumns).
  const std::int64_t by_length = rows * kColumns / kMinChunk;
  if (chunks > by_length) chunks = by_length;
  if (chunks > kMaxGridY) chunks = kMaxGridY;
  if (chunks < 1) chunks = 1;
  const std::int64_t rows_per_chunk = ceil_div(rows, chunks);
  return {column_blocks, rows == 0 ? 1 : ceil_div(rows, rows_per_chunk), rows_per_chunk};
}

}  // namespace flaxpp::kernels
