// The index primitives' host-side plans: row sizes, checked indices.
#include "backend/index_plan.hpp"

#include <functional>
#include <numeric>

#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/lax.hpp"

namespace flaxpp::backend_impl {

std::int64_t row_elements(const Shape& x) {
  const auto& dims = x.dims();
  return std::accumulate(dims.begin() + 1, dims.end(), std::int64_t{1}, std::multiplies<>());
}

IndexedRows indexed_rows(const ir::Primitive& prim, std::span<const Array> in) {
  return {lax::checked_indices(in[1], in[0].shape()[0], prim.name()), row_elements(in[0].shape())};
}

}  // namespace flaxpp::backend_impl
