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
// i_0 * strides[0] + ... + i_r * strides[r]. Broadcasts (stride 0) and axis permutations are
// special cases.
struct StridedCopy {
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> strides;
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
  std::int64_t m = 0, n = 0, k = 0;                       // out is (m, n) column-major
  std::int64_t ld_first = 0, ld_second = 0, ld_out = 0;   // leading dimensions
  std::int64_t stride_first = 0, stride_second = 0, stride_out = 0;  // between batch elements
  std::int64_t batch = 0;
};
ColumnMajorGemm column_major_gemm(const DotPlan& p);

}  // namespace flaxpp::backend_impl
