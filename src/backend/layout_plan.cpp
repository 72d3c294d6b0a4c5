// The layout plans shared by the backends (layout_plan.hpp).
#include "backend/layout_plan.hpp"

#include <algorithm>
#include <optional>

namespace flaxpp::backend_impl {

std::vector<std::int64_t> row_major_strides(std::span<const std::int64_t> dims) {
  std::vector<std::int64_t> strides(dims.size());
  std::int64_t stride = 1;
  for (std::size_t k = dims.size(); k-- > 0;) {
    strides[k] = stride;
    stride *= dims[k];
  }
  return strides;
}

std::int64_t StridedCopy::size() const {
  std::int64_t total = 1;
  for (const std::int64_t d : dims)
    total *= d;
  return total;
}

StridedCopy simplify(const StridedCopy& copy) {
  StridedCopy out;
  out.offset = copy.offset;
  for (std::size_t k = 0; k < copy.dims.size(); ++k) {
    if (copy.dims[k] == 1) continue;
    if (!out.dims.empty() && out.strides.back() == copy.strides[k] * copy.dims[k]) {
      out.dims.back() *= copy.dims[k];
      out.strides.back() = copy.strides[k];
    } else {
      out.dims.push_back(copy.dims[k]);
      out.strides.push_back(copy.strides[k]);
    }
  }
  return out;
}

StridedCopy broadcast_copy(std::span<const std::int64_t> operand_dims,
                           std::span<const std::int64_t> broadcast_dimensions,
                           std::span<const std::int64_t> out_dims) {
  const std::vector<std::int64_t> operand_strides = row_major_strides(operand_dims);
  StridedCopy copy{{out_dims.begin(), out_dims.end()}, std::vector<std::int64_t>(out_dims.size())};
  for (std::size_t i = 0; i < broadcast_dimensions.size(); ++i)
    if (operand_dims[i] != 1)
      copy.strides[static_cast<std::size_t>(broadcast_dimensions[i])] = operand_strides[i];
  return copy;
}

StridedCopy transpose_copy(std::span<const std::int64_t> operand_dims,
                           std::span<const std::int64_t> permutation) {
  const std::vector<std::int64_t> operand_strides = row_major_strides(operand_dims);
  StridedCopy copy;
  for (const std::int64_t axis : permutation) {
    copy.dims.push_back(operand_dims[static_cast<std::size_t>(axis)]);
    copy.strides.push_back(operand_strides[static_cast<std::size_t>(axis)]);
  }
  return copy;
}

StridedCopy slice_copy(std::span<const std::int64_t> operand_dims,
                       std::span<const std::int64_t> start, std::span<const std::int64_t> strides,
                       std::span<const std::int64_t> out_dims) {
  const std::vector<std::int64_t> operand_strides = row_major_strides(operand_dims);
  StridedCopy copy{{out_dims.begin(), out_dims.end()}, std::vector<std::int64_t>(out_dims.size())};
  for (std::size_t i = 0; i < out_dims.size(); ++i) {
    copy.strides[i] = operand_strides[i] * strides[i];
    copy.offset += operand_strides[i] * start[i];
  }
  return copy;
}

StridedCopy rev_copy(std::span<const std::int64_t> operand_dims,
                     std::span<const std::int64_t> dimensions) {
  StridedCopy copy{{operand_dims.begin(), operand_dims.end()}, row_major_strides(operand_dims)};
  for (const std::int64_t axis : dimensions) {
    const auto k = static_cast<std::size_t>(axis);
    if (operand_dims[k] == 0) continue;
    copy.offset += (operand_dims[k] - 1) * copy.strides[k];
    copy.strides[k] = -copy.strides[k];
  }
  return copy;
}

StridedPlacement pad_placement(std::span<const std::int64_t> operand_dims,
                               std::span<const std::int64_t> low,
                               std::span<const std::int64_t> interior,
                               std::span<const std::int64_t> out_dims) {
  const std::vector<std::int64_t> src = row_major_strides(operand_dims),
                                  dst = row_major_strides(out_dims);
  StridedPlacement p;
  for (std::size_t i = 0; i < operand_dims.size(); ++i) {
    // Operand element j lands at low + j * step; those in [0, out) are kept.
    const std::int64_t step = interior[i] + 1;
    const std::int64_t first = low[i] >= 0 ? 0 : (-low[i] + step - 1) / step;
    const std::int64_t end = out_dims[i] <= low[i] ? 0 : (out_dims[i] - low[i] + step - 1) / step;
    const std::int64_t count = std::max<std::int64_t>(std::min(end, operand_dims[i]) - first, 0);
    p.src.dims.push_back(count);
    p.src.strides.push_back(src[i]);
    p.src.offset += first * src[i];
    p.dst_strides.push_back(step * dst[i]);
    p.dst_offset += (low[i] + first * step) * dst[i];
  }
  return p;
}

StridedPlacement simplify(const StridedPlacement& placement) {
  const StridedCopy& src = placement.src;
  StridedPlacement out;
  out.src.offset = src.offset;
  out.dst_offset = placement.dst_offset;
  for (std::size_t k = 0; k < src.dims.size(); ++k) {
    if (src.dims[k] == 1) continue;
    if (!out.src.dims.empty() && out.src.strides.back() == src.strides[k] * src.dims[k] &&
        out.dst_strides.back() == placement.dst_strides[k] * src.dims[k]) {
      out.src.dims.back() *= src.dims[k];
      out.src.strides.back() = src.strides[k];
      out.dst_strides.back() = placement.dst_strides[k];
    } else {
      out.src.dims.push_back(src.dims[k]);
      out.src.strides.push_back(src.strides[k]);
      out.dst_strides.push_back(placement.dst_strides[k]);
    }
  }
  return out;
}

StridedPlacement block_placement(std::span<const std::int64_t> operand_dims,
                                 std::span<const std::int64_t> starts,
                                 std::span<const std::int64_t> out_dims) {
  StridedPlacement p;
  p.src = {{operand_dims.begin(), operand_dims.end()}, row_major_strides(operand_dims)};
  p.dst_strides = row_major_strides(out_dims);
  for (std::size_t i = 0; i < starts.size(); ++i)
    p.dst_offset += starts[i] * p.dst_strides[i];
  return p;
}

AxisLines axis_lines(std::span<const std::int64_t> dims, std::int64_t axis) {
  AxisLines lines{1, dims[static_cast<std::size_t>(axis)], 1};
  for (std::size_t k = 0; k < dims.size(); ++k) {
    if (k < static_cast<std::size_t>(axis)) lines.outer *= dims[k];
    if (k > static_cast<std::size_t>(axis)) lines.inner *= dims[k];
  }
  return lines;
}

AxisLines axis_lines(std::span<const std::int64_t> dims, const ir::Params& params) {
  if (params.has("axes")) return axis_lines(dims, params.get<std::vector<std::int64_t>>("axes")[0]);
  return axis_lines(dims, params.get<std::int64_t>(params.has("axis") ? "axis" : "dimension"));
}

std::vector<ReduceGroup> reduce_groups(std::span<const std::int64_t> operand_dims,
                                       std::span<const std::int64_t> axes) {
  std::vector<ReduceGroup> groups;
  for (std::size_t k = 0; k < operand_dims.size(); ++k) {
    const std::int64_t d = operand_dims[k];
    const bool reduced = std::find(axes.begin(), axes.end(), std::int64_t(k)) != axes.end();
    if (d == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced) {
      groups.back().size *= d;
    } else {
      groups.push_back({d, reduced});
    }
  }
  if (groups.empty()) groups.push_back({1, false});
  return groups;
}

std::pair<std::int64_t, std::int64_t> last_axis_rows(std::span<const std::int64_t> dims) {
  const std::int64_t f = dims.back();
  std::int64_t size = 1;
  for (const std::int64_t d : dims)
    size *= d;
  return {f == 0 ? 0 : size / f, f};
}

namespace {

std::int64_t product(std::span<const std::int64_t> dims, const std::vector<std::int64_t>& axes) {
  std::int64_t p = 1;
  for (const std::int64_t a : axes)
    p *= dims[static_cast<std::size_t>(a)];
  return p;
}

// Axes of a rank-`rank` operand that are neither batch nor contracting, ascending (the
// order in which they appear in the result).
std::vector<std::int64_t> free_axes(std::size_t rank, const std::vector<std::int64_t>& batch,
                                    const std::vector<std::int64_t>& contracting) {
  std::vector<std::int64_t> free;
  for (std::int64_t a = 0; a < static_cast<std::int64_t>(rank); ++a)
    if (std::find(batch.begin(), batch.end(), a) == batch.end() &&
        std::find(contracting.begin(), contracting.end(), a) == contracting.end())
      free.push_back(a);
  return free;
}

std::vector<std::int64_t> concat(const std::vector<std::int64_t>& a,
                                 const std::vector<std::int64_t>& b,
                                 const std::vector<std::int64_t>& c) {
  std::vector<std::int64_t> out(a);
  out.insert(out.end(), b.begin(), b.end());
  out.insert(out.end(), c.begin(), c.end());
  return out;
}

bool is_identity(const std::vector<std::int64_t>& order) {
  for (std::size_t i = 0; i < order.size(); ++i)
    if (order[i] != static_cast<std::int64_t>(i)) return false;
  return true;
}

// `axes` of a row-major array of `dims` as one axis: its size and stride, where walking them
// in order (size-1 axes aside) walks memory as one axis does; nullopt otherwise.
std::optional<std::pair<std::int64_t, std::int64_t>> as_one_axis(
    std::span<const std::int64_t> dims, const std::vector<std::int64_t>& strides,
    const std::vector<std::int64_t>& axes) {
  std::int64_t size = 1, stride = 1;
  bool first = true;
  for (auto a = axes.rbegin(); a != axes.rend(); ++a) {
    const auto i = static_cast<std::size_t>(*a);
    if (dims[i] == 1) continue;
    if (first) {
      stride = strides[i];
      first = false;
    } else if (strides[i] != stride * size) {
      return std::nullopt;
    }
    size *= dims[i];
  }
  return std::pair{size, stride};
}

// The operand as (batch, rows, cols) matrices: no copy when its memory is already in that
// order or in (batch, cols, rows) order; otherwise the gather that permutes it there.
MatrixOperand matrix_operand(std::span<const std::int64_t> dims,
                             const std::vector<std::int64_t>& batch,
                             const std::vector<std::int64_t>& rows,
                             const std::vector<std::int64_t>& cols) {
  const std::vector<std::int64_t> order = concat(batch, rows, cols);
  MatrixOperand m;
  if (is_identity(order)) return m;
  if (is_identity(concat(batch, cols, rows))) {
    m.transposed = true;
  } else {
    m.needs_permute = true;
    m.permute = transpose_copy(dims, order);
  }
  return m;
}

// m.dims and m.strides: the operand read in place, where its rows and its cols each walk
// memory as one axis.
void read_in_place(MatrixOperand& m, std::span<const std::int64_t> dims,
                   const std::vector<std::int64_t>& batch, const std::vector<std::int64_t>& rows,
                   const std::vector<std::int64_t>& cols) {
  const std::vector<std::int64_t> strides = row_major_strides(dims);
  const auto r = as_one_axis(dims, strides, rows), c = as_one_axis(dims, strides, cols);
  if (!r || !c) return;
  for (const std::int64_t a : batch) {
    m.dims.push_back(dims[static_cast<std::size_t>(a)]);
    m.strides.push_back(strides[static_cast<std::size_t>(a)]);
  }
  m.dims.insert(m.dims.end(), {r->first, c->first});
  m.strides.insert(m.strides.end(), {r->second, c->second});
}

}  // namespace

DotPlan plan_dot(std::span<const std::int64_t> lhs_dims, std::span<const std::int64_t> rhs_dims,
                 const ir::DotDimensionNumbers& dn) {
  const std::vector<std::int64_t> lhs_free =
      free_axes(lhs_dims.size(), dn.lhs_batch, dn.lhs_contracting);
  const std::vector<std::int64_t> rhs_free =
      free_axes(rhs_dims.size(), dn.rhs_batch, dn.rhs_contracting);
  DotPlan plan;
  plan.batch = product(lhs_dims, dn.lhs_batch);
  plan.m = product(lhs_dims, lhs_free);
  plan.k = product(lhs_dims, dn.lhs_contracting);
  plan.n = product(rhs_dims, rhs_free);
  plan.lhs = matrix_operand(lhs_dims, dn.lhs_batch, lhs_free, dn.lhs_contracting);
  plan.rhs = matrix_operand(rhs_dims, dn.rhs_batch, dn.rhs_contracting, rhs_free);
  // Only a product with a permuted copy to spare is worth describing with strides.
  if (plan.lhs.needs_permute || plan.rhs.needs_permute) {
    read_in_place(plan.lhs, lhs_dims, dn.lhs_batch, lhs_free, dn.lhs_contracting);
    read_in_place(plan.rhs, rhs_dims, dn.rhs_batch, dn.rhs_contracting, rhs_free);
  }
  return plan;
}

ColumnMajorGemm column_major_gemm(const DotPlan& p) {
  ColumnMajorGemm g;
  g.transpose_first = p.rhs.transposed;
  g.transpose_second = p.lhs.transposed;
  g.m = p.n;
  g.n = p.m;
  g.k = p.k;
  g.ld_first = p.rhs.transposed ? p.k : p.n;
  g.ld_second = p.lhs.transposed ? p.m : p.k;
  g.ld_out = p.n;
  g.stride_first = p.k * p.n;
  g.stride_second = p.m * p.k;
  g.stride_out = p.m * p.n;
  g.batch = p.batch;
  return g;
}

}  // namespace flaxpp::backend_impl
