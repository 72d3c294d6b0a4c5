// The strided gather (of layout_plan.hpp's plans) on the CPU: the layout primitives
// broadcast_in_dim, reshape, transpose and slice (eval_table.hpp) and dot_general's operand
// permutation.
#include <algorithm>
#include <cstddef>

#include "backend/cpu/cpu_eval_impl.hpp"
#include "backend/cpu/cpu_parallel.hpp"

namespace flaxpp::cpu {

namespace {

// Square tiles for strided 2-D copies: 32x32 elements of 8 bytes (8 KiB read + 8 KiB written)
// stay in L1 while a transposed tile is walked.
constexpr std::int64_t kTile = 32;

// out (rows, cols), contiguous, gets in[r * rs + c * cs]. Reads along a row are contiguous
// (cs == 1) or constant (cs == 0, a broadcast) in the simple case; otherwise the copy goes
// tile by tile so that both the read and the written lines are reused from cache.
template <class T>
void copy_2d(const T* in, std::int64_t rs, std::int64_t cs, std::int64_t rows, std::int64_t cols,
             T* out) {
  // Rows that are contiguous runs (copies) or one repeated element (broadcasts) go through
  // memcpy/memset-speed loops: a run-time stride would keep the plain loop from vectorising.
  if (cs == 1) {
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy_n(in + r * rs, cols, out + r * cols);
    return;
  }
  if (cs == 0) {
    for (std::int64_t r = 0; r < rows; ++r)
      std::fill_n(out + r * cols, cols, in[r * rs]);
    return;
  }
  if (rows == 1) {
    for (std::int64_t c = 0; c < cols; ++c)
      out[c] = in[c * cs];
    return;
  }
  for (std::int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const std::int64_t r1 = std::min(r0 + kTile, rows);
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const std::int64_t c1 = std::min(c0 + kTile, cols);
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c)
          out[r * cols + c] = in[r * rs + c * cs];
    }
  }
}

// gather_strided for dims already simplified: the last two axes as one 2-D copy each, the
// result's rows shared among the CPU's threads.
template <class T>
void gather_strided_t(const T* in, std::span<const std::int64_t> dims,
                      std::span<const std::int64_t> strides, T* out) {
  const std::size_t r = dims.size();
  if (r == 0) {
    out[0] = in[0];
    return;
  }
  const std::int64_t cols = dims[r - 1], cs = strides[r - 1];
  const std::int64_t rows = r >= 2 ? dims[r - 2] : 1, rs = r >= 2 ? strides[r - 2] : 0;
  const std::size_t outer_rank = r >= 2 ? r - 2 : 0;
  std::int64_t outer = 1;
  for (std::size_t k = 0; k < outer_rank; ++k)
    outer *= dims[k];
  // The offset in `in` of 2-D slab o.
  const auto slab_offset = [&](std::int64_t o) {
    std::int64_t offset = 0;
    for (std::size_t k = outer_rank; k-- > 0;) {
      offset += o % dims[k] * strides[k];
      o /= dims[k];
    }
    return offset;
  };
  // Units are rows of the result, shared among the CPU's threads; a share copies its rows slab
  // by slab.
  parallel_rows(outer * rows, cols, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t u = begin; u < end;) {
      const std::int64_t o = u / rows, first = u % rows;
      const std::int64_t count = std::min(rows - first, end - u);
      copy_2d(in + slab_offset(o) + first * rs, rs, cs, count, cols, out + u * cols);
      u += count;
    }
  });
}

}  // namespace

void gather_strided(const void* in, const backend_impl::StridedCopy& copy, std::size_t itemsize,
                    void* out) {
  if (copy.size() == 0) return;
  const backend_impl::StridedCopy simple = backend_impl::simplify(copy);
  const std::vector<std::int64_t>& dims = simple.dims;
  const std::vector<std::int64_t>& strides = simple.strides;
  in = static_cast<const std::byte*>(in) + simple.offset * static_cast<std::int64_t>(itemsize);
  switch (itemsize) {
    case 1:
      return gather_strided_t(static_cast<const std::uint8_t*>(in), dims, strides,
                              static_cast<std::uint8_t*>(out));
    case 4:
      return gather_strided_t(static_cast<const std::uint32_t*>(in), dims, strides,
                              static_cast<std::uint32_t*>(out));
    case 8:
      return gather_strided_t(static_cast<const std::uint64_t*>(in), dims, strides,
                              static_cast<std::uint64_t*>(out));
    default:
      FLAXPP_ASSERT(false, "gather_strided: itemsize ", itemsize);
  }
}

Array Families::gather(const ir::Primitive& prim, const Array& x,
                       const backend_impl::StridedCopy& copy, const AVal& out) {
  return visit_dtype<kAll>(prim, x.dtype(), [&]<class T>(TypeTag<T>) {
    const Output o(out);
    gather_strided(in_data<T>(x), copy, sizeof(T), o.data<T>());
    return o.array();
  });
}

}  // namespace flaxpp::cpu
