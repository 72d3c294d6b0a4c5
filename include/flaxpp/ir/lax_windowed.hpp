// flaxpp/ir/lax_windowed.hpp — jax.lax's reductions over windows (reduce_window with add or
// max) and select_and_scatter_add, the transpose of max's window selection.
#pragma once

#include <cstdint>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax_convolution.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::lax {

// The window of a reduction, one entry per axis of the operand, named and defaulted as
// jax.lax.reduce_window's arguments: strides and dilations all 1 and padding all 0 where empty.
struct WindowOptions {
  std::vector<std::int64_t> window_dimensions{}, window_strides{};
  Padding padding{};
  std::vector<std::int64_t> base_dilation{}, window_dilation{};
};

// reduce_window_sum(x) and reduce_window_max(x) (jax.lax's primitives of reduce_window with
// lax.add and lax.max from 0 and -inf): params "window_dimensions", "window_strides",
// "padding_low", "padding_high", "base_dilation", "window_dilation". Floating operands; padding
// elements count as the reduction's initial value. Their VJPs are JAX's: the sum's a
// reduce_window_sum of the padded cotangent, the max's select_and_scatter_add.
extern const ir::Primitive reduce_window_sum_p, reduce_window_max_p;
Array reduce_window_sum(const Array& x, const WindowOptions& window);
Array reduce_window_max(const Array& x, const WindowOptions& window);

// select_and_scatter_add(source, operand): params "window_dimensions", "window_strides",
// "padding_low", "padding_high"; source has reduce_window_max(operand)'s shape. The result,
// operand-shaped, holds at each element the sum of source over the windows whose maximum (the
// first largest element, as XLA's select with `ge`) it is. No VJP: flaxpp differentiates max
// pooling once.
extern const ir::Primitive select_and_scatter_add_p;
Array select_and_scatter_add(const Array& source, const Array& operand,
                             const WindowOptions& window);

}  // namespace flaxpp::lax
