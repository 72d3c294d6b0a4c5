// Private to the backends: the geometry of the windowed primitives (conv_general_dilated,
// reduce_window_sum / reduce_window_max, select_and_scatter_add) from their operands and
// params, filled once per call on the host; flaxpp/kernels/window.hpp computes each element
// from it on every backend.
#pragma once

#include <cstdint>
#include <vector>

#include "flaxpp/ir/params.hpp"
#include "flaxpp/kernels/window.hpp"

namespace flaxpp::backend_impl {

// conv_general_dilated of operands of `lhs_dims` and `rhs_dims` into `out_dims`, all
// row-major, with the equation's params.
kernels::ConvGeometry conv_geometry(const std::vector<std::int64_t>& lhs_dims,
                                    const std::vector<std::int64_t>& rhs_dims,
                                    const std::vector<std::int64_t>& out_dims,
                                    const ir::Params& params);

// A window over an operand of `in_dims` giving `out_dims`; without dilation params (those of
// select_and_scatter_add) the dilations are 1.
kernels::WindowGeometry window_geometry(const std::vector<std::int64_t>& in_dims,
                                        const std::vector<std::int64_t>& out_dims,
                                        const ir::Params& params);

}  // namespace flaxpp::backend_impl
