// conv_general_dilated, reduce_window_sum / reduce_window_max and select_and_scatter_add on
// the CPU: each result element by flaxpp/kernels/window.hpp, as on CUDA.
#include <limits>

#include "backend/cpu/cpu_eval_impl.hpp"
#include "backend/window_plan.hpp"

namespace flaxpp::cpu {

Array Families::conv_general_dilated(const ir::Primitive& prim, std::span<const Array> in,
                                     const ir::Params& params, const AVal& out) {
  const kernels::ConvGeometry g = backend_impl::conv_geometry(
      in[0].shape().dims(), in[1].shape().dims(), out.shape.dims(), params);
  return visit_dtype<kFloat>(prim, out.dtype, [&]<class T>(TypeTag<T>) {
    const Output o(out);
    const T *lhs = in_data<T>(in[0]), *rhs = in_data<T>(in[1]);
    T* ys = o.data<T>();
    for (std::int64_t i = 0; i < g.count; ++i)
      kernels::conv_element<T>(g, lhs, rhs, ys, i);
    return o.array();
  });
}

template <bool kMax>
Array Families::reduce_window(const ir::Primitive& prim, std::span<const Array> in,
                              const ir::Params& params, const AVal& out) {
  const kernels::WindowGeometry g =
      backend_impl::window_geometry(in[0].shape().dims(), out.shape.dims(), params);
  return visit_dtype<kFloat>(prim, out.dtype, [&]<class T>(TypeTag<T>) {
    const Output o(out);
    const T* xs = in_data<T>(in[0]);
    T* ys = o.data<T>();
    const T init = kMax ? -std::numeric_limits<T>::infinity() : T(0);
    for (std::int64_t i = 0; i < out.shape.size(); ++i)
      ys[i] = kernels::reduce_window_element<kMax>(g, xs, i, init);
    return o.array();
  });
}

FLAXPP_EVAL_INSTANTIATE_REDUCE_WINDOW;

Array Families::select_and_scatter_add(const ir::Primitive& prim, std::span<const Array> in,
                                       const ir::Params& params, const AVal& out) {
  const kernels::WindowGeometry g =
      backend_impl::window_geometry(out.shape.dims(), in[0].shape().dims(), params);
  return visit_dtype<kFloat>(prim, out.dtype, [&]<class T>(TypeTag<T>) {
    const Output o(out);
    const T *source = in_data<T>(in[0]), *operand = in_data<T>(in[1]);
    T* ys = o.data<T>();
    for (std::int64_t i = 0; i < out.shape.size(); ++i)
      ys[i] = kernels::select_and_scatter_element<T>(g, source, operand, i);
    return o.array();
  });
}

}  // namespace flaxpp::cpu
