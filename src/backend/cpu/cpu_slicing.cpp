// pad and concatenate on the CPU: each operand written into its part of the result through
// layout_plan.hpp's placements (slice is a gather, eval_table.hpp).
#include <algorithm>
#include <cstddef>

#include "backend/cpu/cpu_eval_impl.hpp"

namespace flaxpp::cpu {
namespace {

// Writes `p`'s elements of `in` into `out`: the last axis as one strided loop, the outer axes
// walked with an odometer.
template <class T>
void place(const T* in, const backend_impl::StridedPlacement& p, T* out) {
  const std::int64_t n = p.src.size();
  if (n == 0) return;
  const std::size_t r = p.src.dims.size();
  if (r == 0) {
    out[p.dst_offset] = in[p.src.offset];
    return;
  }
  const std::int64_t cols = p.src.dims[r - 1], ss = p.src.strides[r - 1], ds = p.dst_strides[r - 1];
  std::vector<std::int64_t> index(r - 1, 0);
  std::int64_t src = p.src.offset, dst = p.dst_offset;
  for (std::int64_t row = 0; row < n / cols; ++row) {
    for (std::int64_t c = 0; c < cols; ++c)
      out[dst + c * ds] = in[src + c * ss];
    for (std::size_t k = r - 1; k-- > 0;) {
      src += p.src.strides[k];
      dst += p.dst_strides[k];
      if (++index[k] < p.src.dims[k]) break;
      src -= p.src.strides[k] * p.src.dims[k];
      dst -= p.dst_strides[k] * p.src.dims[k];
      index[k] = 0;
    }
  }
}

}  // namespace

Array Families::pad(const ir::Primitive& prim, std::span<const Array> in, const ir::Params& params,
                    const AVal& out) {
  const Array& x = in[0];
  const backend_impl::StridedPlacement p = backend_impl::pad_placement(
      x.shape().dims(), params.get<std::vector<std::int64_t>>("low"),
      params.get<std::vector<std::int64_t>>("interior"), out.shape.dims());
  return visit_dtype<kAll>(prim, x.dtype(), [&]<class T>(TypeTag<T>) {
    const Output o(out);
    std::fill_n(o.data<T>(), out.shape.size(), in_data<T>(in[1])[0]);
    place(in_data<T>(x), p, o.data<T>());
    return o.array();
  });
}

Array Families::concatenate(const ir::Primitive& prim, std::span<const Array> in,
                            const ir::Params& params, const AVal& out) {
  const std::int64_t dimension = params.get<std::int64_t>("dimension");
  return visit_dtype<kAll>(prim, out.dtype, [&]<class T>(TypeTag<T>) {
    const Output o(out);
    std::int64_t start = 0;
    for (const Array& x : in) {
      place(
          in_data<T>(x),
          backend_impl::concatenate_placement(x.shape().dims(), dimension, start, out.shape.dims()),
          o.data<T>());
      start += x.shape()[dimension];
    }
    return o.array();
  });
}

}  // namespace flaxpp::cpu
