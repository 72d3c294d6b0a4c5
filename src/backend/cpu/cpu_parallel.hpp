// Private to the CPU backend: the parallel loop of its own kernels (fused programs, reductions
// along the last axes, LayerNorm, the unary and binary primitives, strided copies, copies
// between buffers, the fused attention). It runs on the threads the products run on (oneDNN's
// OpenMP team, onednn_runtime.hpp), as many as cpu::num_threads() asks for, so that the step's
// elementwise passes use the core whose thread would otherwise wait between products; in a
// build without oneDNN everything runs on the calling thread.
//
// A share is a run of whole units on one thread, in order, so a kernel whose units are
// independent (chunks of elements, rows) gives the same bits for every thread count.
#pragma once

#include <cstdint>
#include <functional>

namespace flaxpp::cpu {

// body(begin, end) over consecutive shares of [0, units), none of fewer than `min_share` units
// (the work below which handing a share to another thread costs more than it saves). body
// must not throw.
void parallel_for(std::int64_t units, std::int64_t min_share,
                  const std::function<void(std::int64_t begin, std::int64_t end)>& body);

// The fewest elements a share of an elementwise or row loop reads: a few microseconds of work,
// against about one for handing it to a waiting thread.
inline constexpr std::int64_t kMinShareElements = 8192;

// parallel_for over `rows` rows of `row_length` elements each, in shares of at least
// kMinShareElements.
inline void parallel_rows(std::int64_t rows, std::int64_t row_length,
                          const std::function<void(std::int64_t begin, std::int64_t end)>& body) {
  const std::int64_t length = row_length > 0 ? row_length : 1;
  parallel_for(rows, (kMinShareElements + length - 1) / length, body);
}

// parallel_for over the `columns` columns of `rows` rows (a sum over rows per column, each
// share walking every row), in shares of at least kMinShareElements elements.
inline void parallel_columns(
    std::int64_t rows, std::int64_t columns,
    const std::function<void(std::int64_t begin, std::int64_t end)>& body) {
  parallel_rows(columns, rows, body);
}

}  // namespace flaxpp::cpu
