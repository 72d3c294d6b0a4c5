// argmax, argmin, cumsum, argsort and permute_along_axis on the GPU
// (kernels/along_axis_kernels.cuh), in the CPU's order.
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "kernels/along_axis_kernels.cuh"

namespace flaxpp::cuda {

// The index along the axis of the element `Better` picks first, per line.
template <class Better>
Array Families::arg_reduce(const ir::Primitive& prim, std::span<const Array> in,
                           const ir::Params& params, const AVal& out) {
  const Array& x = in[0];
  const backend_impl::AxisLines lines = backend_impl::axis_lines(x.shape().dims(), params);
  return visit_dtype<kNumeric | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, x.device());
    check_launch(
        kernels::launch_arg_reduce<Better>(in_data<T>(x), lines.outer, lines.extent, lines.inner,
                                           o.data<std::int32_t>(), backend_of(x).stream()),
        prim.name().c_str());
    return o.array();
  });
}

FLAXPP_EVAL_INSTANTIATE_ARG_REDUCE;

Array Families::cumsum(const ir::Primitive& prim, std::span<const Array> in,
                       const ir::Params& params, const AVal& out) {
  const Array& x = in[0];
  const backend_impl::AxisLines lines = backend_impl::axis_lines(x.shape().dims(), params);
  return visit_dtype<kNumeric | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, x.device());
    check_launch(
        kernels::launch_cumsum(in_data<T>(x), lines.outer, lines.extent, lines.inner,
                               params.get<bool>("reverse"), o.data<T>(), backend_of(x).stream()),
        "cumsum");
    return o.array();
  });
}

Array Families::argsort(const ir::Primitive& prim, std::span<const Array> in,
                        const ir::Params& params, const AVal& out) {
  const Array& x = in[0];
  const backend_impl::AxisLines lines = backend_impl::axis_lines(x.shape().dims(), params);
  return visit_dtype<kNumeric | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, x.device());
    check_launch(
        kernels::launch_argsort(in_data<T>(x), lines.outer, lines.extent, lines.inner,
                                params.get<bool>("descending"), params.get<bool>("signed_zeros"),
                                o.data<std::int32_t>(), backend_of(x).stream()),
        "argsort");
    return o.array();
  });
}

Array Families::permute_along_axis(const ir::Primitive& prim, std::span<const Array> in,
                                   const ir::Params& params, const AVal& out) {
  const Array& x = in[0];
  const backend_impl::AxisLines lines = backend_impl::axis_lines(x.shape().dims(), params);
  return visit_dtype<kAll | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, x.device());
    check_launch(
        kernels::launch_permute(in_data<T>(x), in_data<std::int32_t>(in[1]), lines.outer,
                                lines.extent, lines.inner, o.data<T>(), backend_of(x).stream()),
        "permute_along_axis");
    return o.array();
  });
}

}  // namespace flaxpp::cuda
