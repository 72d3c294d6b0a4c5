// Private to the backends: the index arithmetic of the layout-moving primitives, planned once
// on the host and shared by every backend so that they agree on it. A plan says which element
// of the operand lands where; each backend only moves the bytes (CPU loops, CUDA kernels).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "flaxpp/ir/params.hpp"

namespace flaxpp::backend_impl {

// Row-major strides, in elements, of an array of `dims`.
std::vector<std::int64_t> row_major_strides(std::span<const std::int64_t> dims);

// A strided gather: result element (i_0, ..., i_r) (row-major over `dims`) is operand element
// offset + i_0 * strides[0] + ... + i_r * strides[r]. Broadcasts (stride 0), axis permutations
// and slices are special cases.
struct StridedCopy {
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> strides;
  std::int64_t offset = 0;
  std::int64_t size() const;
};

// The same gather with size-1 axes dropped and every pair of adjacent axes that walks the
// operand like one axis merged (an identity permutation becomes one contiguous run).
StridedCopy simplify(const StridedCopy& copy);

// broadcast_in_dim of an operand of `operand_dims` to `out_dims`: result axis
// broadcast_dimensions[i] walks operand axis i; every other axis repeats.
StridedCopy broadcast_copy(std::span<const std::int64_t> operand_dims,
                           std::span<const std::int64_t> broadcast_dimensions,
                           std::span<const std::int64_t> out_dims);
// transpose: result axis i walks operand axis permutation[i].
StridedCopy transpose_copy(std::span<const std::int64_t> operand_dims,
                           std::span<const std::int64_t> permutation);

// slice: result axis i walks operand axis i from start[i] in steps of strides[i].
StridedCopy slice_copy(std::span<const std::int64_t> operand_dims,
                       std::span<const std::int64_t> start, std::span<const std::int64_t> strides,
                       std::span<const std::int64_t> out_dims);

// rev: the axes in `dimensions` walked from their last element back.
StridedCopy rev_copy(std::span<const std::int64_t> operand_dims,
                     std::span<const std::int64_t> dimensions);

// A copy between two strided views, for the primitives that write an operand into part of
// their result (pad, concatenate, dynamic_update_slice): element (i_0, ..., i_r) over `dims` of the
// operand at src.offset + sum i_k src.strides[k] goes to the result at dst_offset + sum i_k
// dst_strides[k].
struct StridedPlacement {
  StridedCopy src;  // its dims are the placement's
  std::vector<std::int64_t> dst_strides;
  std::int64_t dst_offset = 0;
};
// The same placement with size-1 axes dropped and adjacent axes merged where both views walk
// them like one.
StridedPlacement simplify(const StridedPlacement& placement);
// pad of an operand of `operand_dims` into `out_dims` by `low` and `interior` per axis: the
// operand elements that land inside the result (negative low or high padding crops).
StridedPlacement pad_placement(std::span<const std::int64_t> operand_dims,
                               std::span<const std::int64_t> low,
                               std::span<const std::int64_t> interior,
                               std::span<const std::int64_t> out_dims);
// An operand of `operand_dims` written whole as the block of `out_dims` that starts at
// `starts` (one per axis; the block fits): concatenate's operands, dynamic_update_slice's
// update.
StridedPlacement block_placement(std::span<const std::int64_t> operand_dims,
                                 std::span<const std::int64_t> starts,
                                 std::span<const std::int64_t> out_dims);

// An array as lines along one axis (argmax, argmin, cumsum, iota): element (o, j, i) — outer
// index o, j along the axis, inner index i — is at (o * extent + j) * inner + i.
struct AxisLines {
  std::int64_t outer, extent, inner;
};
AxisLines axis_lines(std::span<const std::int64_t> dims, std::int64_t axis);
// The lines along the one axis a primitive's params name, whichever JAX's name for it is:
// "axes" (argmax, argmin), "axis" (cumsum, permute_along_axis) or "dimension" (argsort).
AxisLines axis_lines(std::span<const std::int64_t> dims, const ir::Params& params);

// A reduction over some axes, as runs of adjacent operand axes that are all reduced or all
// kept, each merged into one (size-1 axes dropped). Never empty: a single element is one
// kept group of size 1.
struct ReduceGroup {
  std::int64_t size;
  bool reduced;
};
std::vector<ReduceGroup> reduce_groups(std::span<const std::int64_t> operand_dims,
                                       std::span<const std::int64_t> axes);

// An operand as rows over its last axis (LayerNorm): {rows, features}; rows is 0 when the last
// axis is empty.
std::pair<std::int64_t, std::int64_t> last_axis_rows(std::span<const std::int64_t> dims);

// dot_general as a batch of matrix products: the result (batch, lhs free, rhs free) is
// (batch, m, n) row-major; per batch element, lhs as an (m, k) matrix times rhs as (k, n).
// An operand whose memory is already (batch, rows, cols) is used as is; stored as (batch,
// cols, rows) it is read transposed; any other layout needs `permute` (a gather into
// (batch, rows, cols)) first.
struct MatrixOperand {
  bool transposed = false;
  bool needs_permute = false;
  StridedCopy permute{};  // when needs_permute: the gather into (batch, rows, cols)
  // The operand read where it is, for an engine that takes strides (oneDNN's matmul): as
  // (batch axes..., rows, cols), each batch axis a dimension of its own and the rows and the
  // cols one dimension each, with their strides in elements. Empty where the rows or the cols
  // do not walk memory as one axis, and where neither operand needs a permuted copy.
  std::vector<std::int64_t> dims, strides;
};
struct DotPlan {
  std::int64_t batch = 1, m = 1, n = 1, k = 1;
  MatrixOperand lhs;  // as (batch, m, k)
  MatrixOperand rhs;  // as (batch, k, n)
};
DotPlan plan_dot(std::span<const std::int64_t> lhs_dims, std::span<const std::int64_t> rhs_dims,
                 const ir::DotDimensionNumbers& dn);

// A DotPlan as one column-major strided batched GEMM (cuBLAS's cublasGemmStridedBatchedEx):
// out = op(first) op(second) per batch element, every matrix column-major. The row-major
// (m, n) product C = A B is the column-major (n, m) product C^T = B^T A^T, and a row-major
// matrix read column-major is its transpose, so the first argument is the rhs (B) and the
// second the lhs (A), each with its stored layout's leading dimension. The CPU tests run this
// plan through a reference column-major GEMM for every dot_general layout.
struct ColumnMajorGemm {
  bool transpose_first = false, transpose_second = false;
  std::int64_t m = 0, n = 0, k = 0;                                  // out is (m, n) column-major
  std::int64_t ld_first = 0, ld_second = 0, ld_out = 0;              // leading dimensions
  std::int64_t stride_first = 0, stride_second = 0, stride_out = 0;  // between batch elements
  std::int64_t batch = 0;
};
ColumnMajorGemm column_major_gemm(const DotPlan& p);

}  // namespace flaxpp::backend_impl
