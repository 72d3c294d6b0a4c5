// The index primitives' host-side plans: iota's axis, row sizes, and scatter_add's row groups
// (a stable counting sort of the index positions by index value).
#include "backend/index_plan.hpp"

#include <functional>
#include <numeric>

#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/lax.hpp"

namespace flaxpp::backend_impl {

IotaAxis iota_axis(const Shape& shape, std::int64_t dimension) {
  const auto& dims = shape.dims();
  const auto axis = dims.begin() + dimension;
  return {std::accumulate(axis + 1, dims.end(), std::int64_t{1}, std::multiplies<>()), *axis};
}

IndexedRows indexed_rows(const ir::Primitive& prim, std::span<const Array> in) {
  const auto& dims = in[0].shape().dims();
  return {lax::checked_indices(in[1], dims[0], prim.name()),
          std::accumulate(dims.begin() + 1, dims.end(), std::int64_t{1}, std::multiplies<>())};
}

RowGroups group_by_row(std::span<const std::int32_t> indices, std::int64_t num_rows) {
  FLAXPP_ASSERT(indices.size() < (std::size_t{1} << 31), "group_by_row: ", indices.size(),
                " indices do not fit int32 positions");
  std::vector<std::int32_t> count(static_cast<std::size_t>(num_rows) + 1, 0);
  for (const std::int32_t i : indices) {
    FLAXPP_ASSERT(i >= 0 && i < num_rows, "group_by_row: index ", i, " outside [0, ", num_rows,
                  ")");
    ++count[static_cast<std::size_t>(i) + 1];
  }
  RowGroups g;
  for (std::int64_t r = 0; r < num_rows; ++r) {
    const auto k = static_cast<std::size_t>(r);
    if (count[k + 1] > 0) {
      g.rows.push_back(static_cast<std::int32_t>(r));
      g.begin.push_back(count[k]);
    }
    count[k + 1] += count[k];  // count[r] becomes the first slot of row r
  }
  g.begin.push_back(static_cast<std::int32_t>(indices.size()));
  g.order.resize(indices.size());
  for (std::size_t j = 0; j < indices.size(); ++j)
    g.order[static_cast<std::size_t>(count[static_cast<std::size_t>(indices[j])]++)] =
        static_cast<std::int32_t>(j);
  return g;
}

}  // namespace flaxpp::backend_impl
