// Private to the backends: the host-side plans of the index primitives, shared by the CPU and
// CUDA implementations — the elements per row of take and scatter_add,
// and (on the CPU, which has the indices at hand) their indices checked.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::backend_impl {

// The elements per row of x (N, rest...): the product of rest.
std::int64_t row_elements(const Shape& x);

// The operands of take and scatter_add, (x (N, rest...), indices, ...), checked: every index
// in [0, N) (lax::checked_indices), the indices' values on the host, and row_elements(x).
struct IndexedRows {
  std::vector<std::int32_t> indices;
  std::int64_t row_size;
};
IndexedRows indexed_rows(const ir::Primitive& prim, std::span<const Array> in);

}  // namespace flaxpp::backend_impl
