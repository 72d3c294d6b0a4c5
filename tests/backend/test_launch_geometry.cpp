// The CUDA kernels' launch geometry and index arithmetic, checked on the CPU (they are plain
// C++): grid sizes within CUDA's limits, reduction plans whose chunks cover every element
// exactly once (replayed here with host loops), and FastDivmod against / and %.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fast_divmod.hpp"
#include "kernels/launch_geometry.hpp"

using namespace flaxpp::kernels;

namespace {

// The sum of 0, 1, ..., n - 1 read the way a split row reduction reads one row: chunk by
// chunk, each chunk's elements in the strided order of its block's threads.
std::int64_t split_row_sum(std::int64_t cols, const RowReducePlan& plan) {
  std::int64_t total = 0, seen = 0;
  for (std::int64_t chunk = 0; chunk < plan.chunks; ++chunk) {
    const std::int64_t begin = chunk * plan.chunk;
    const std::int64_t end = begin + plan.chunk < cols ? begin + plan.chunk : cols;
    CHECK(begin < end);  // no empty chunk
    for (std::int64_t t = 0; t < kBlockThreads; ++t)
      for (std::int64_t c = begin + t; c < end; c += kBlockThreads) {
        total += c;
        ++seen;
      }
  }
  CHECK(seen == cols);
  return total;
}

// Every row of a (rows, cols) column reduction counted once across the plan's chunks and
// row lanes.
void check_column_cover(std::int64_t rows, std::int64_t cols) {
  const ColumnReducePlan plan = plan_column_reduce(rows, cols);
  CAPTURE(rows);
  CAPTURE(cols);
  CHECK(plan.column_blocks * kColumns >= cols);
  CHECK((plan.column_blocks - 1) * kColumns < cols);
  CHECK(plan.chunks >= 1);
  CHECK(plan.chunks <= kMaxGridY);
  std::vector<int> seen(static_cast<std::size_t>(rows), 0);
  for (std::int64_t chunk = 0; chunk < plan.chunks; ++chunk) {
    const std::int64_t begin = chunk * plan.rows_per_chunk;
    const std::int64_t end = begin + plan.rows_per_chunk < rows ? begin + plan.rows_per_chunk : rows;
    if (rows > 0) CHECK(begin < end);
    for (std::int64_t lane = 0; lane < kRowLanes; ++lane)
      for (std::int64_t r = begin + lane; r < end; r += kRowLanes)
        ++seen[static_cast<std::size_t>(r)];
  }
  for (const int s : seen)
    CHECK(s == 1);
}

}  // namespace

TEST_CASE("grid_blocks: at least one block, one per 256 elements, at most 65536") {
  CHECK(grid_blocks(0) == 1);
  CHECK(grid_blocks(1) == 1);
  CHECK(grid_blocks(256) == 1);
  CHECK(grid_blocks(257) == 2);
  CHECK(grid_blocks(std::int64_t{65536} * 256) == 65536);
  CHECK(grid_blocks(std::int64_t{1} << 40) == 65536);  // the grid-stride loop takes the rest
}

TEST_CASE("plan_row_reduce: warps for short rows, blocks for many rows, chunks for few long ones") {
  CHECK(plan_row_reduce(100000, 10).kind == RowReducePlan::Kind::warp_per_row);
  CHECK(plan_row_reduce(100000, 10).blocks == 12500);
  CHECK(plan_row_reduce(std::int64_t{1} << 30, 2).blocks == kMaxGridBlocks);
  CHECK(plan_row_reduce(100000, 5000).kind == RowReducePlan::Kind::block_per_row);
  CHECK(plan_row_reduce(100000, 5000).blocks == 65536);
  // Beyond gridDim.y's range rows are never split.
  CHECK(plan_row_reduce(70000, 1 << 20).kind == RowReducePlan::Kind::block_per_row);
  // A full sum over 16M elements: about kTargetBlocks chunks.
  const RowReducePlan full = plan_row_reduce(1, std::int64_t{1} << 24);
  REQUIRE(full.kind == RowReducePlan::Kind::split);
  CHECK(full.chunks > 512);
  CHECK(full.chunks <= kTargetBlocks);
  // Long rows, but not long enough to split past one chunk each: one block per row.
  CHECK(plan_row_reduce(4, 6000).kind == RowReducePlan::Kind::block_per_row);
}

TEST_CASE("plan_row_reduce: a split covers every element of a row exactly once") {
  for (const std::int64_t cols : {std::int64_t{8193}, std::int64_t{1} << 20, std::int64_t{3000017}}) {
    for (const std::int64_t rows : {1, 3, 100}) {
      const RowReducePlan plan = plan_row_reduce(rows, cols);
      CAPTURE(cols);
      CAPTURE(rows);
      if (plan.kind != RowReducePlan::Kind::split) continue;
      CHECK(plan.chunks <= kWarpRowMaxCols);  // the second pass is one warp per row
      CHECK(plan.chunk * plan.chunks >= cols);
      CHECK(split_row_sum(cols, plan) == cols * (cols - 1) / 2);
    }
  }
}

TEST_CASE("plan_column_reduce: chunks in proportion to the rows, every row counted once") {
  // A bias gradient over (batch * seq, features): many chunks where there are few columns.
  CHECK(plan_column_reduce(65536, 512).chunks > 16);
  CHECK(plan_column_reduce(100, 512).chunks == 1);  // short: one pass
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {0, 5}, {1, 1}, {7, 33}, {4096, 32}, {65537, 512}, {300000, 3}, {1000, 100000}})
    check_column_cover(rows, cols);
}

TEST_CASE("FastDivmod: equals / and % for every divisor and dividend tried, up to 2^31 - 1") {
  std::mt19937 rng(7);
  std::vector<std::uint32_t> divisors;
  for (std::uint32_t d = 1; d <= 4096; ++d)
    divisors.push_back(d);
  for (int i = 0; i < 2000; ++i)
    divisors.push_back(static_cast<std::uint32_t>(1 + rng() % FastDivmod::kMaxDividend));
  for (const std::uint32_t d : {65535u, 65536u, 65537u, (1u << 30) + 1, FastDivmod::kMaxDividend})
    divisors.push_back(d);
  for (const std::uint32_t d : divisors) {
    const FastDivmod fd(d);
    std::vector<std::uint32_t> ns{0, 1, d - 1, d, d + 1, FastDivmod::kMaxDividend,
                                  FastDivmod::kMaxDividend - 1, FastDivmod::kMaxDividend - d + 1};
    for (int i = 0; i < 64; ++i)
      ns.push_back(static_cast<std::uint32_t>(rng() % (FastDivmod::kMaxDividend + 1u)));
    for (const std::uint32_t n : ns) {
      if (n > FastDivmod::kMaxDividend) continue;
      std::uint32_t q = 0, r = 0;
      fd.divmod(n, q, r);
      if (q != n / d || r != n % d) {
        CAPTURE(d);
        CAPTURE(n);
        CHECK(q == n / d);
        CHECK(r == n % d);
      }
    }
  }
}
