// flaxpp/ir/lax_convolution.hpp — jax.lax.conv_general_dilated: the primitive, its typed
// function, its dimension numbers and the padding strings of jax.lax.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::lax {

// jax.lax.ConvDimensionNumbers: which axis of each operand is which. lhs_spec is (batch,
// feature, spatial...), rhs_spec (output feature, input feature, spatial...), out_spec (batch,
// feature, spatial...), each a permutation of its operand's axes.
struct ConvDimensionNumbers {
  std::vector<std::int64_t> lhs_spec, rhs_spec, out_spec;
};

// jax.lax.conv_dimension_numbers for layout strings of one rank, such as ("NHWC", "HWIO",
// "NHWC") (Flax's) or ("NCHW", "OIHW", "NCHW") (lax's default): N batch, C feature, O and I the
// kernel's output and input features, any other letter a spatial axis, in the order the lhs
// string names them (the rhs and output strings use the same letters).
ConvDimensionNumbers conv_dimension_numbers(const std::string& lhs, const std::string& rhs,
                                            const std::string& out);

using Padding = std::vector<std::pair<std::int64_t, std::int64_t>>;

// jax.lax.padtype_to_pads: "SAME" (the output has ceil(in / stride) elements, the odd padding
// element at the end), "SAME_LOWER" (at the start) or "VALID" (none), per axis of `in_shape`.
Padding padtype_to_pads(const std::vector<std::int64_t>& in_shape,
                        const std::vector<std::int64_t>& window_shape,
                        const std::vector<std::int64_t>& window_strides,
                        const std::string& padding);

// Padding as jax.lax and Flax take it: a padtype_to_pads string or one (low, high) pair per
// axis. resolve_padding gives the pairs (for a string, padtype_to_pads of the arguments).
using PaddingSpec = std::variant<std::string, Padding>;
Padding resolve_padding(const PaddingSpec& padding, const std::vector<std::int64_t>& in_shape,
                        const std::vector<std::int64_t>& window_shape,
                        const std::vector<std::int64_t>& window_strides);

// The options of conv_general_dilated, named and defaulted as jax.lax's arguments: strides
// and dilations all 1 and padding all 0 where empty, lax's default layouts (batch and feature
// first) where dimension_numbers is empty.
struct ConvOptions {
  std::vector<std::int64_t> window_strides{};
  Padding padding{};
  std::vector<std::int64_t> lhs_dilation{}, rhs_dilation{};
  ConvDimensionNumbers dimension_numbers{};
  std::int64_t feature_group_count = 1, batch_group_count = 1;
};

// conv_general_dilated(lhs, rhs): params "window_strides", "padding_low", "padding_high",
// "lhs_dilation", "rhs_dilation" (one per spatial axis), "lhs_spec", "rhs_spec", "out_spec",
// "feature_group_count", "batch_group_count", as jax.lax (at most one group count above 1).
// Floating operands of one dtype. Its VJP is JAX's: both cotangents are convolutions
// (convolution.cpp).
extern const ir::Primitive conv_general_dilated_p;
Array conv_general_dilated(const Array& lhs, const Array& rhs, const ConvOptions& options = {});

// jax.lax.conv_transpose: the gradient of a strided convolution as a convolution of lhs
// dilated by `strides`. "SAME" / "VALID" padding is that of the forward convolution it
// transposes (JAX's _conv_transpose_padding against the dilated kernel); pairs are the padding
// of the dilated convolution itself. dimension_numbers empty: channels last (NHWC, HWIO, NHWC
// for two spatial axes). transpose_kernel: the kernel's spatial axes reversed and its two
// feature axes swapped, as the gradient of the forward convolution uses it.
Array conv_transpose(const Array& lhs, const Array& rhs, const std::vector<std::int64_t>& strides,
                     const PaddingSpec& padding, std::vector<std::int64_t> rhs_dilation = {},
                     ConvDimensionNumbers dimension_numbers = {}, bool transpose_kernel = false);

}  // namespace flaxpp::lax
