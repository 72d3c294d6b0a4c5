// flaxpp/ir/lax.hpp — the primitives, named and specified as in jax.lax, with one typed
// function each. These are strict: elementwise operands have equal shapes and dtypes, except
// that a 0-d operand broadcasts against the other (like a scalar literal in a jaxpr). The
// broadcasting, promoting numpy-style API is in flaxpp/ops.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/precision.hpp"
#include "flaxpp/ir/elementwise_program.hpp"
#include "flaxpp/ir/primitive.hpp"
#include "flaxpp/kernels/elementwise.hpp"

namespace flaxpp::lax {

// The elementwise primitives, one per line of flaxpp/kernels/elementwise.hpp's lists, each as
// name_p and its typed function name(). The line names the functor that is its math (there: div
// truncates integers, max and min propagate NaN, sign gives NaN for NaN) and its dtypes;
// binary ones and comparisons take two operands of one dtype, comparisons give bool.
#define FLAXPP_LAX_DECLARE_BINARY(name, ...) \
  extern const ir::Primitive name##_p;       \
  Array name(const Array& x, const Array& y);
#define FLAXPP_LAX_DECLARE_UNARY(name, ...) \
  extern const ir::Primitive name##_p;      \
  Array name(const Array& x);
FLAXPP_ELEMENTWISE_BINARY(FLAXPP_LAX_DECLARE_BINARY)
FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_LAX_DECLARE_BINARY)
FLAXPP_ELEMENTWISE_UNARY(FLAXPP_LAX_DECLARE_UNARY)
#undef FLAXPP_LAX_DECLARE_BINARY
#undef FLAXPP_LAX_DECLARE_UNARY

// x**y for an integer y (param "y", int64; may be negative or 0), by repeated multiplication.
extern const ir::Primitive integer_pow_p;
// select_n(which, case0, case1, ...): which is bool (2 cases: false -> case0, true -> case1)
// or int32 (which[i] picks case which[i]); all cases one aval; which has their shape or is 0-d.
extern const ir::Primitive select_n_p;
// Sum / max over the axes in param "axes" (sorted, distinct); those axes are removed.
extern const ir::Primitive reduce_sum_p, reduce_max_p;
// Param "shape" (the result's dims) and "broadcast_dimensions" (for each operand axis, the
// result axis it maps to, strictly increasing; operand dim is 1 or equal to that result dim).
extern const ir::Primitive broadcast_in_dim_p;
// Param "new_sizes": the result dims (same element count), row-major order kept.
extern const ir::Primitive reshape_p;
// Param "permutation": result axis i is operand axis permutation[i].
extern const ir::Primitive transpose_p;
// Param "new_dtype": elementwise conversion (float->int truncates toward zero; ->bool is != 0).
extern const ir::Primitive convert_element_type_p;
// Param "dimension_numbers" (DotDimensionNumbers) and optional "preferred_element_type".
// Result dims: batch dims (lhs order), then lhs free dims, then rhs free dims.
extern const ir::Primitive dot_general_p;
// dot_general(lhs, rhs) + bias for a float32/float64 product without batch dims, the bias of
// the rhs free axes' shape added along them (broadcast over the lhs free axes). Made only by
// jit's fuse_dot_bias pass (ir/passes.hpp), so that a GPU adds the bias in the product's
// cuBLASLt epilogue and the CPU in one pass over the fresh product; the same bits as the
// product and the add. No VJP.
extern const ir::Primitive dot_general_bias_p;
// Identity whose gradient is zero.
extern const ir::Primitive stop_gradient_p;
// checkpoint_name's primitive: identity tagging its value with param "name" for remat policies.
extern const ir::Primitive name_p;
// iota: no operands; params "dtype" (numeric), "shape" and "dimension": each element is its
// index along axis `dimension` (jax.lax.iota / broadcasted_iota).
extern const ir::Primitive iota_p;
// take(x, indices): x (N, rest...), indices int32 (idx...) -> (idx..., rest...), row
// indices[j] of x at position j: jnp.take(x, indices, axis=0) as one primitive (JAX binds a
// gather with offset_dims = the rest, collapsed_slice_dims = (0,), start_index_map = (0,)).
// Every index must lie in [0, N): backends refuse others (checked_indices) where JAX returns NaN
// rows or wraps. Any dtype. Its transpose is scatter_add.
extern const ir::Primitive take_p;
// scatter_add(x, indices, updates): x (N, rest...), indices int32 (idx...), updates
// (idx..., rest...) -> x with updates[j] added to row indices[j], in the order of j (so every
// backend sums repeated rows in one order). Numeric dtypes; indices checked as for take.
extern const ir::Primitive scatter_add_p;
// slice: params "start_indices", "limit_indices" and "strides" (each one per axis; 0 <= start
// <= limit <= dim, stride >= 1): the elements start, start + stride, ... below limit of each
// axis (jax.lax.slice). Its transpose is pad with zeros.
extern const ir::Primitive slice_p;
// rev: param "dimensions" (distinct axes): x with those axes reversed (jax.lax.rev). Its
// transpose is itself.
extern const ir::Primitive rev_p;
// pad(x, padding_value): padding_value 0-d of x's dtype; params "low", "high" and "interior"
// (one per axis): low and high elements of padding_value before and after each axis (negative
// ones crop), interior ones between its elements (>= 0) (jax.lax.pad).
extern const ir::Primitive pad_p;
// concatenate(xs...): one or more operands of one dtype and rank, equal in every axis but
// param "dimension", joined along it in order (jax.lax.concatenate).
extern const ir::Primitive concatenate_p;
// dynamic_slice(x, start_0, ..., start_{r-1}): param "slice_sizes" (one per axis, 0 <= size
// <= dim); each start a 0-d int32 operand, counted from the end when negative (dim added once)
// and then clamped to [0, dim - size] so that the slice fits, as jax.lax.dynamic_slice places
// it. Its transpose is dynamic_update_slice into zeros.
extern const ir::Primitive dynamic_slice_p;
// dynamic_update_slice(x, update, start_0, ..., start_{r-1}): x with the block at the starts
// replaced by update (x's dtype and rank, each dim <= x's); starts placed as for dynamic_slice
// (jax.lax.dynamic_update_slice).
extern const ir::Primitive dynamic_update_slice_p;
// argmax / argmin: param "axes" (one axis, non-empty) and "index_dtype" (int32): the index
// along it of the first largest / smallest element, where a NaN counts as larger / smaller
// than anything (the first NaN wins), as jax.lax.argmax. Numeric operands; no gradient.
extern const ir::Primitive argmax_p, argmin_p;
// argsort: params "dimension", "descending" and "signed_zeros" (bools): int32, along each line
// of the axis the positions of its elements in sorted order, stable (equal keys keep their
// order), in flaxpp/kernels/sort_order.hpp's order (NaN above every number; -0.0 below 0.0 only
// with signed_zeros, top_k's order). Numeric operands; no gradient.
extern const ir::Primitive argsort_p;
// permute_along_axis(x, permutation): param "axis"; permutation int32 of x's shape, along each
// line of the axis a permutation of its positions (what argsort gives): result element j of a
// line is the line's element permutation[j] (positions outside the line are clamped to it).
// Its transpose permutes by the inverse permutation, which is only right for a permutation.
extern const ir::Primitive permute_along_axis_p;
// cumsum: params "axis" and "reverse" (bool): the running sums along the axis, from its end
// when reverse (jax.lax.cumsum). Numeric operands. Its transpose is cumsum reversed.
extern const ir::Primitive cumsum_p;
// flaxpp's fused LayerNorm (not in jax.lax): layer_norm(x, scale, bias), param "epsilon", over
// the last axis of x (..., F) with scale and bias (F,), Flax's formula (layer_norm.cpp). Its VJP
// uses layer_norm_dx(x, scale, dy) and layer_norm_dscale(x, dy), which have no VJP themselves.
extern const ir::Primitive layer_norm_p, layer_norm_dx_p, layer_norm_dscale_p;
// flaxpp's fused elementwise primitive (not in jax.lax: XLA's loop fusion, made explicit):
// param "program" (ElementwiseProgram). Operands: the program's num_scalars 0-d arrays, then
// groups of num_inputs arrays, the arrays of a group of one shape (groups may differ) but the
// program's broadcast operands, which the group's elements read repeatedly; all
// of one floating dtype but the program's masks, which are bool. Results: for each group, one
// array per program output, of the group's shape and that dtype, then one per row reduction, of
// the group's shape without the program's row_axes trailing axes. A backend runs all groups in one
// pass (on CUDA: one kernel launch). Param "donate" (optional, bool): a result may reuse the buffer
// of an input of its group that no other Array holds. No VJP.
extern const ir::Primitive fused_elementwise_p;

Array integer_pow(const Array& x, std::int64_t y);
Array select_n(const Array& which, std::span<const Array> cases);
Array select(const Array& pred, const Array& on_true,
             const Array& on_false);  // select_n(pred, f, t)
Array reduce_sum(const Array& x, std::vector<std::int64_t> axes);
Array reduce_max(const Array& x, std::vector<std::int64_t> axes);
Array broadcast_in_dim(const Array& x, const Shape& shape,
                       std::vector<std::int64_t> broadcast_dimensions);
Array reshape(const Array& x, const Shape& new_sizes);
Array transpose(const Array& x, std::vector<std::int64_t> permutation);
Array convert_element_type(const Array& x, DType new_dtype);
// precision: the products' (float32, or tensorfloat32 on GPUs), fixed when the primitive is
// bound (traced); default_matmul_precision() where absent.
Array dot_general(const Array& lhs, const Array& rhs,
                  const ir::DotDimensionNumbers& dimension_numbers,
                  std::optional<DType> preferred_element_type = std::nullopt,
                  std::optional<MatmulPrecision> precision = std::nullopt);
// The precision a dot_general equation's params fix (float32 where they name none).
MatmulPrecision dot_precision(const ir::Params& params);
Array stop_gradient(const Array& x);
// jax.ad_checkpoint.checkpoint_name.
Array checkpoint_name(const Array& x, const std::string& name);

Array iota(DType dtype, const Shape& shape, std::int64_t dimension = 0);
Array take(const Array& x, const Array& indices);
Array scatter_add(const Array& x, const Array& indices, const Array& updates);
// The values of `indices` (concrete int32) on the host; throws ValueError naming `what` and
// the first index outside [0, size): the check behind take and scatter_add (on a GPU it waits
// for the indices), for callers that want it up front too.
std::vector<std::int32_t> checked_indices(const Array& indices, std::int64_t size,
                                          const std::string& what);
// checked_indices's error, for `index` at `position` of `indices` (a description, such as the
// indices' aval): also the CUDA backend's, which checks indices on the device.
ValueError index_outside_error(const std::string& what, std::int64_t index, std::int64_t position,
                               const std::string& indices, std::int64_t size);

// strides: all 1 when empty (the equation then holds ones).
Array slice(const Array& x, std::vector<std::int64_t> start_indices,
            std::vector<std::int64_t> limit_indices, std::vector<std::int64_t> strides = {});
Array rev(const Array& x, std::vector<std::int64_t> dimensions);
// One (low, high, interior) triple per axis of x.
struct PadConfig {
  std::int64_t low = 0, high = 0, interior = 0;
};
Array pad(const Array& x, const Array& padding_value, std::span<const PadConfig> config);
Array concatenate(std::span<const Array> operands, std::int64_t dimension);
// start_indices: one 0-d int32 array per axis of x.
Array dynamic_slice(const Array& x, std::span<const Array> start_indices,
                    std::vector<std::int64_t> slice_sizes);
Array dynamic_update_slice(const Array& x, const Array& update,
                           std::span<const Array> start_indices);
Array argmax(const Array& x, std::int64_t axis, DType index_dtype = DType::i32);
Array argmin(const Array& x, std::int64_t axis, DType index_dtype = DType::i32);
Array cumsum(const Array& x, std::int64_t axis, bool reverse = false);
Array argsort(const Array& x, std::int64_t dimension, bool descending = false,
              bool signed_zeros = false);
Array permute_along_axis(const Array& x, const Array& permutation, std::int64_t axis);
// jax.lax.sort of one operand: x sorted along `dimension` (stable), as permute_along_axis of
// argsort, so that its VJP is the cotangent permuted back.
Array sort(const Array& x, std::int64_t dimension);
// jax.lax.top_k: the k largest elements along the last axis and their int32 positions, larger
// first, ties by position, in top_k's total order (NaN largest, 0.0 above -0.0).
std::pair<Array, Array> top_k(const Array& x, std::int64_t k);

Array layer_norm(const Array& x, const Array& scale, const Array& bias, double epsilon);
Array layer_norm_dx(const Array& x, const Array& scale, const Array& dy, double epsilon);
Array layer_norm_dscale(const Array& x, const Array& dy, double epsilon);
// The results of `program` over groups of program->num_inputs arrays each (inputs, group after
// group): group g's results are results[g * num_outputs ...].
std::vector<Array> fused_elementwise(std::shared_ptr<const ir::ElementwiseProgram> program,
                                     std::span<const Array> scalars, std::span<const Array> inputs);
// The same, taking the inputs over (JAX's donation): a group's results may be written into the
// buffers of its inputs that nothing else holds, instead of new buffers.
std::vector<Array> fused_elementwise_donated(std::shared_ptr<const ir::ElementwiseProgram> program,
                                             std::span<const Array> scalars,
                                             std::vector<Array>&& inputs);

// A 0-d array holding `value` converted to `dtype` (a literal in traced graphs).
Array scalar(double value, DType dtype);
// An array of x's shape and dtype filled with `value`.
Array full_like(const Array& x, double value);
Array zeros_like(const Array& x);

}  // namespace flaxpp::lax
