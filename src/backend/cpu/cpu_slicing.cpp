// pad, concatenate, dynamic_slice and dynamic_update_slice on the CPU: each operand written
// into its part of the result through layout_plan.hpp's placements, or read through a gather
// (slice is one too, eval_table.hpp).
#include <algorithm>
#include <cstddef>

#include "backend/cpu/cpu_eval_impl.hpp"
#include "flaxpp/kernels/clamp_start.hpp"

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

// The starts of a dynamic slice of sizes `sizes` from `x`: in[first...], read and clamped.
std::vector<std::int64_t> clamped_starts(std::span<const Array> in, std::size_t first,
                                         const Shape& x, std::span<const std::int64_t> sizes) {
  std::vector<std::int64_t> starts(sizes.size());
  for (std::size_t k = 0; k < starts.size(); ++k)
    starts[k] =
        kernels::clamp_start(in_data<std::int32_t>(in[first + k])[0], x.dims()[k], sizes[k]);
  return starts;
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
    std::vector<std::int64_t> starts(static_cast<std::size_t>(out.shape.rank()), 0);
    for (const Array& x : in) {
      place(in_data<T>(x),
            backend_impl::block_placement(x.shape().dims(), starts, out.shape.dims()), o.data<T>());
      starts[static_cast<std::size_t>(dimension)] += x.shape()[dimension];
    }
    return o.array();
  });
}

Array Families::dynamic_slice(const ir::Primitive& prim, std::span<const Array> in,
                              const ir::Params& /*params*/, const AVal& out) {
  const Array& x = in[0];
  const std::vector<std::int64_t> starts = clamped_starts(in, 1, x.shape(), out.shape.dims());
  const std::vector<std::int64_t> unit(starts.size(), 1);
  return gather(prim, x, backend_impl::slice_copy(x.shape().dims(), starts, unit, out.shape.dims()),
                out);
}

Array Families::dynamic_update_slice(const ir::Primitive& prim, std::span<const Array> in,
                                     const ir::Params& /*params*/, const AVal& out) {
  const Array &x = in[0], &update = in[1];
  const std::vector<std::int64_t> starts = clamped_starts(in, 2, x.shape(), update.shape().dims());
  return visit_dtype<kAll>(prim, x.dtype(), [&]<class T>(TypeTag<T>) {
    const Output o(out);
    std::copy_n(in_data<T>(x), x.size(), o.data<T>());
    place(in_data<T>(update),
          backend_impl::block_placement(update.shape().dims(), starts, out.shape.dims()),
          o.data<T>());
    return o.array();
  });
}

}  // namespace flaxpp::cpu
