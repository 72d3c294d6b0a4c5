// argmax, argmin, cumsum, argsort and permute_along_axis on the GPU
// (kernels/along_axis_kernels.cuh), in the CPU's order.
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "kernels/along_axis_kernels.cuh"

namespace flaxpp::cuda {
namespace {

template <class Better>
Array arg_reduce(const ir::Primitive& prim, std::span<const Array> in, const ir::Params& params,
                 const AVal& out) {
  const Array& x = in[0];
  const backend_impl::AxisLines lines =
      backend_impl::axis_lines(x.shape().dims(), params.get<std::vector<std::int64_t>>("axes")[0]);
  return visit_dtype<kNumeric | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, x.device());
    check_launch(
        kernels::launch_arg_reduce<Better>(in_data<T>(x), lines.outer, lines.extent, lines.inner,
                                           o.data<std::int32_t>(), backend_of(x).stream()),
        prim.name().c_str());
    return o.array();
  });
}

}  // namespace

Array Families::argmax(const ir::Primitive& prim, std::span<const Array> in,
                       const ir::Params& params, const AVal& out) {
  return arg_reduce<kernels::ArgmaxBetter>(prim, in, params, out);
}

Array Families::argmin(const ir::Primitive& prim, std::span<const Array> in,
                       const ir::Params& params, const AVal& out) {
  return arg_reduce<kernels::ArgminBetter>(prim, in, params, out);
}

Array Families::cumsum(const ir::Primitive& prim, std::span<const Array> in,
                       const ir::Params& params, const AVal& out) {
  const Array& x = in[0];
  const backend_impl::AxisLines lines =
      backend_impl::axis_lines(x.shape().dims(), params.get<std::int64_t>("axis"));
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
  const backend_impl::AxisLines lines =
      backend_impl::axis_lines(x.shape().dims(), params.get<std::int64_t>("dimension"));
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
  const backend_impl::AxisLines lines =
      backend_impl::axis_lines(x.shape().dims(), params.get<std::int64_t>("axis"));
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
