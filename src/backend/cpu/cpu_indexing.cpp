// The index primitives on the CPU: iota, take (rows copied whole) and scatter_add (rows added
// in index order, the order every backend sums repeated rows in).
#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_eval_impl.hpp"
#include "backend/index_plan.hpp"

namespace flaxpp::cpu {

Array Families::iota(const ir::Primitive& prim, std::span<const Array> /*in*/,
                     const ir::Params& params, const AVal& out) {
  // Element i's value is (i / inner) % extent.
  const backend_impl::AxisLines axis =
      backend_impl::axis_lines(out.shape.dims(), params.get<std::int64_t>("dimension"));
  return visit_dtype<kNumeric>(prim, out.dtype, [&]<class T>(TypeTag<T>) {
    const Output o(out);
    T* ys = o.data<T>();
    for (std::int64_t line = 0; line < axis.outer; ++line)  // runs of `inner` equal values
      for (std::int64_t v = 0; v < axis.extent; ++v)
        ys = std::fill_n(ys, axis.inner, static_cast<T>(v));
    return o.array();
  });
}

Array Families::take(const ir::Primitive& prim, std::span<const Array> in,
                     const ir::Params& /*params*/, const AVal& out) {
  const backend_impl::IndexedRows rows = backend_impl::indexed_rows(prim, in);
  const std::size_t row_bytes = static_cast<std::size_t>(rows.row_size) * itemsize(out.dtype);
  const Output o(out);
  const auto* src = in_data<std::uint8_t>(in[0]);
  auto* dst = o.data<std::uint8_t>();
  for (const std::int32_t i : rows.indices) {
    std::memcpy(dst, src + static_cast<std::size_t>(i) * row_bytes, row_bytes);
    dst += row_bytes;
  }
  return o.array();
}

Array Families::scatter_add(const ir::Primitive& prim, std::span<const Array> in,
                            const ir::Params& /*params*/, const AVal& out) {
  const backend_impl::IndexedRows rows = backend_impl::indexed_rows(prim, in);
  const std::int64_t r = rows.row_size;
  return visit_dtype<kNumeric>(prim, out.dtype, [&]<class T>(TypeTag<T>) {
    const Output o(out);
    T* ys = o.data<T>();
    std::copy_n(in_data<T>(in[0]), out.shape.size(), ys);
    const T* u = in_data<T>(in[2]);
    for (const std::int32_t i : rows.indices) {
      T* row = ys + static_cast<std::int64_t>(i) * r;
      for (std::int64_t c = 0; c < r; ++c)
        row[c] += u[c];
      u += r;
    }
    return o.array();
  });
}

}  // namespace flaxpp::cpu
