// Private to the backends: the host-side plans of the index primitives, shared by the CPU and
// CUDA implementations — iota's axis geometry, the row size of take and scatter_add, and
// scatter_add's updates grouped by destination row, so that a GPU thread per (row, column)
// adds a row's updates in index order (the order the CPU adds them in) without atomics, and
// results are the same on every device.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::backend_impl {

// iota along `dimension` of `shape`: element i's value is (i / inner) % extent.
struct IotaAxis {
  std::int64_t inner;   // elements after the axis
  std::int64_t extent;  // the axis's size
};
IotaAxis iota_axis(const Shape& shape, std::int64_t dimension);

// The operands of take and scatter_add, (x (N, rest...), indices, ...), checked: every index
// in [0, N) (lax::checked_indices; on a GPU this waits for the indices), the indices' values
// on the host, and the elements per row (the product of rest).
struct IndexedRows {
  std::vector<std::int32_t> indices;
  std::int64_t row_size;
};
IndexedRows indexed_rows(const ir::Primitive& prim, std::span<const Array> in);

// The rows that receive updates, ascending; the updates of rows[s] are the positions
// order[begin[s]] .. order[begin[s + 1] - 1] of the indices, ascending.
struct RowGroups {
  std::vector<std::int32_t> rows;
  std::vector<std::int32_t> begin;  // rows.size() + 1 entries
  std::vector<std::int32_t> order;  // every position of the indices once
};

// Groups the positions of `indices` (each in [0, num_rows), fewer than 2^31 of them) by
// value: a stable counting sort.
RowGroups group_by_row(std::span<const std::int32_t> indices, std::int64_t num_rows);

}  // namespace flaxpp::backend_impl
