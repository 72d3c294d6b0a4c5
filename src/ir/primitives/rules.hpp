// Helpers shared by the primitive definition files: shape-rule checks with clear errors,
// cotangent reshaping and the common batching rules. Private to src/ir/primitives.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "flaxpp/core/aval.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/lax_convolution.hpp"
#include "flaxpp/ir/primitive_rules.hpp"

namespace flaxpp::lax::rules {

[[noreturn]] void fail(const std::string& prim, const std::string& message);
void expect_arity(const std::string& prim, std::span<const AVal> in, std::size_t n);
// Equal dtypes, and equal shapes or one 0-d operand: the result aval. Bool operands only for
// a comparison.
AVal binary(const std::string& prim, std::span<const AVal> in, bool comparison = false);
void expect_floating(const std::string& prim, const AVal& a);
// The cotangent of an operand of aval `operand` from the cotangent of a broadcasting
// elementwise result: summed over all axes when the operand was 0-d.
Array unbroadcast(const Array& ct, const AVal& operand);
std::string avals_str(std::span<const AVal> in);
// "[1, 2, 3]".
std::string list_str(const std::vector<std::int64_t>& values);
// lax._dilate_shape for one axis: 0 stays 0, else 1 + dilation * (size - 1).
std::int64_t dilate(std::int64_t size, std::int64_t dilation);
// The "padding_low" and "padding_high" params of a windowed primitive as (low, high) pairs, and
// back.
Padding padding_of(const ir::Params& params);
ir::Params with_padding(const ir::Params& params, const Padding& padding);
// JAX's _conv_general_vjp_lhs_padding (convolution.cpp): the padding of the cotangent that
// turns a windowed operation's transpose into the same operation over the cotangent (also
// reduce_window_sum's).
Padding conv_vjp_lhs_padding(const std::vector<std::int64_t>& in_shape,
                             const std::vector<std::int64_t>& window,
                             const std::vector<std::int64_t>& strides,
                             const std::vector<std::int64_t>& out_shape, const Padding& padding,
                             const std::vector<std::int64_t>& lhs_dilation,
                             const std::vector<std::int64_t>& rhs_dilation);

// Batching rules (ir::register_batching; ir::with_batch_axis and ir::move_axis are there): an
// operand marked batched carries the batch axis first.

// Axes of one example as axes of the batch: each one further on.
std::vector<std::int64_t> past_batch_axis(std::vector<std::int64_t> axes);
// `values` prefixed by `first`.
std::vector<std::int64_t> prefixed(std::int64_t first, const std::vector<std::int64_t>& values);
// The params of an equation with `name` set to `value`.
ir::Params with_param(const ir::Params& params, std::string name, ir::ParamValue value);

// The rule of an elementwise primitive: the operands brought to one shape (an operand that is
// 0-d for every example stays so among the first `scalar_operands`, which the primitive
// broadcasts itself), every result batched.
ir::BatchRule batch_elementwise(std::size_t scalar_operands);
// A rule binding the primitive on every operand given the batch axis, with the params
// `batched_params` makes from the equation's: every result batched.
ir::BatchRule batch_every_operand(std::function<ir::Params(const ir::BatchArgs&)> batched_params);
// The rule of a primitive whose params name axes of its operands, all of one rank: every
// operand given the batch axis, the int or list params named in `axis_params` moved past it,
// every result batched.
ir::BatchRule batch_along_axes(std::vector<std::string> axis_params);

}  // namespace flaxpp::lax::rules
