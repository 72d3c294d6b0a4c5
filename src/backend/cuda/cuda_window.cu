// conv_general_dilated, reduce_window_sum / reduce_window_max and select_and_scatter_add on
// the GPU: a convolution that is one of the library passes (conv_library.hpp) on cuDNN where
// it takes it, every other one, and the windowed reductions, in flaxpp's direct kernels
// (kernels/window_kernels.cuh) in the CPU's order.
#include "backend/conv_library.hpp"
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "backend/cuda/cudnn_conv.hpp"
#include "backend/window_plan.hpp"
#include "kernels/window_kernels.cuh"

namespace flaxpp::cuda {

Array Families::conv_general_dilated(const ir::Primitive& prim, std::span<const Array> in,
                                     const ir::Params& params, const AVal& out) {
  const kernels::ConvGeometry g = backend_impl::conv_geometry(
      in[0].shape().dims(), in[1].shape().dims(), out.shape.dims(), params);
  const auto library = backend_impl::as_library_conv(in[0].shape().dims(), in[1].shape().dims(),
                                                     out.shape.dims(), params);
  return visit_dtype<kFloat | kHalf>(prim, out.dtype, in[0].device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, in[0].device());
    if (library && cudnn_conv(backend_of(in[0]), out.dtype, *library, in_data<T>(in[0]),
                              in_data<T>(in[1]), o.data<T>()))
      return o.array();
    check_launch(kernels::launch_conv(g, in_data<T>(in[0]), in_data<T>(in[1]), o.data<T>(),
                                      backend_of(in[0]).stream()),
                 "conv_general_dilated");
    return o.array();
  });
}

template <bool kMax>
Array Families::reduce_window(const ir::Primitive& prim, std::span<const Array> in,
                              const ir::Params& params, const AVal& out) {
  const kernels::WindowGeometry g =
      backend_impl::window_geometry(in[0].shape().dims(), out.shape.dims(), params);
  return visit_dtype<kFloat | kHalf>(prim, out.dtype, in[0].device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, in[0].device());
    check_launch(kernels::launch_reduce_window<kMax>(g, in_data<T>(in[0]), out.shape.size(),
                                                     o.data<T>(), backend_of(in[0]).stream()),
                 prim.name().c_str());
    return o.array();
  });
}

FLAXPP_EVAL_INSTANTIATE_REDUCE_WINDOW;

Array Families::select_and_scatter_add(const ir::Primitive& prim, std::span<const Array> in,
                                       const ir::Params& params, const AVal& out) {
  const kernels::WindowGeometry g =
      backend_impl::window_geometry(out.shape.dims(), in[0].shape().dims(), params);
  return visit_dtype<kFloat | kHalf>(prim, out.dtype, in[0].device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, in[0].device());
    check_launch(kernels::launch_select_and_scatter(g, in_data<T>(in[0]), in_data<T>(in[1]),
                                                    out.shape.size(), o.data<T>(),
                                                    backend_of(in[0]).stream()),
                 "select_and_scatter_add");
    return o.array();
  });
}

}  // namespace flaxpp::cuda
