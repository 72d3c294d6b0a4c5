// CUDA evaluation of the lax primitives: the elementwise, select_n and convert families, whose
// math is flaxpp/kernels/elementwise.hpp's functors — the same
// code the CPU backend runs — applied by the kernels of kernels/elementwise_kernels.cuh.
#include <atomic>
#include <type_traits>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "backend/eval_table.hpp"
#include "flaxpp/core/error.hpp"
#include "kernels/elementwise_kernels.cuh"

namespace flaxpp::cuda {

CudaBackend& backend_of(const Array& a) {
  return static_cast<CudaBackend&>(a.buffer().backend());
}

namespace {
std::atomic<bool> g_use_cudnn{true};
}  // namespace

void set_use_cudnn(bool use) {
  g_use_cudnn.store(use);
}

bool cudnn_allowed() {
  return g_use_cudnn.load();
}

std::int64_t device_memory_bytes(Device device) {
  return static_cast<std::int64_t>(static_cast<CudaBackend&>(backend(device)).total_memory());
}

void check_launch(const char* kernel) {
  check_launch(cudaGetLastError(), kernel);
}

void check_launch(cudaError_t err, const char* kernel) {
  if (err != cudaSuccess)
    throw DeviceError(
        detail::str("CUDA kernel ", kernel, " (or an earlier one) failed: ", cuda_error_text(err)));
}

namespace {

using kernels::compute_t;

// The storage type of a functor's result on elements T: comparisons give bool, stored as one
// byte; everything else is stored as T (16-bit floats round back from float).
template <class Op, class T>
using result_storage_t =
    std::conditional_t<std::is_same_v<decltype(Op{}(compute_t<T>{}, compute_t<T>{})), bool>,
                       std::uint8_t, T>;

}  // namespace

template <unsigned kAllowed, class Op>
Array Families::binary(const ir::Primitive& prim, std::span<const Array> in,
                       const ir::Params& /*params*/, const AVal& out) {
  const Array& x = in[0];
  const Array& y = in[1];
  return visit_dtype<kAllowed>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    using S = result_storage_t<Op, T>;
    const Output o(out, x.device());
    check_launch(kernels::launch_binary(Op{}, in_data<T>(x), x.rank() == 0, in_data<T>(y),
                                        y.rank() == 0, o.data<S>(), out.shape.size(),
                                        backend_of(x).stream()),
                 prim.name().c_str());
    return o.array();
  });
}

template <unsigned kAllowed, class Op>
Array Families::map_unary(const ir::Primitive& prim, const Array& x, const AVal& out, Op op) {
  return visit_dtype<kAllowed>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, x.device());
    check_launch(kernels::launch_unary(op, in_data<T>(x), o.data<T>(), out.shape.size(),
                                       backend_of(x).stream()),
                 prim.name().c_str());
    return o.array();
  });
}

// select_n(which, case_0, ..., case_{n-1}); a 0-d `which` picks for every element.
Array Families::select_n(const ir::Primitive& prim, std::span<const Array> in,
                         const ir::Params& /*params*/, const AVal& out) {
  const Array& which = in[0];
  const std::span<const Array> cases = in.subspan(1);
  if (which.dtype() != DType::bool_ && which.dtype() != DType::i32)
    backend_impl::throw_unsupported_dtype(prim, which.dtype(), which.device());
  if (cases.size() == 1) return cases[0];
  if (cases.size() > static_cast<std::size_t>(kernels::kMaxSelectCases))
    throw ValueError(detail::str("select_n: ", cases.size(),
                                 " cases; the CUDA backend takes at most ",
                                 kernels::kMaxSelectCases, ". Nest select_n calls instead"));
  const Device device = cases[0].device();
  return visit_dtype<kAll | kHalf>(prim, out.dtype, device, [&]<class T>(TypeTag<T>) {
    kernels::SelectCases<T> cs{};
    cs.count = static_cast<int>(cases.size());
    for (std::size_t i = 0; i < cases.size(); ++i)
      cs.data[i] = in_data<T>(cases[i]);
    const Output o(out, device);
    const std::int64_t n = out.shape.size();
    const cudaStream_t stream = backend_of(cases[0]).stream();
    const bool scalar = which.rank() == 0;
    check_launch(which.dtype() == DType::bool_
                     ? kernels::launch_select_n(in_data<std::uint8_t>(which), scalar, cs,
                                                o.data<T>(), n, stream)
                     : kernels::launch_select_n(in_data<std::int32_t>(which), scalar, cs,
                                                o.data<T>(), n, stream),
                 "select_n");
    return o.array();
  });
}

Array Families::convert_element_type(const ir::Primitive& prim, std::span<const Array> in,
                                     const ir::Params& /*params*/, const AVal& out) {
  const Array& x = in[0];
  if (x.dtype() == out.dtype) return x;
  return visit_dtype<kAll | kHalf>(prim, x.dtype(), x.device(), [&]<class From>(TypeTag<From>) {
    return visit_dtype<kAll | kHalf>(prim, out.dtype, x.device(), [&]<class To>(TypeTag<To>) {
      const Output o(out, x.device());
      check_launch(kernels::launch_convert(in_data<From>(x), o.data<To>(), out.shape.size(),
                                           backend_of(x).stream()),
                   "convert_element_type");
      return o.array();
    });
  });
}

std::vector<Array> eval(const ir::Primitive& prim, std::span<const Array> inputs,
                        const ir::Params& params, std::span<const AVal> out_avals) {
  // Kernels and cuBLAS run on the current device: make it the inputs' one.
  FLAXPP_CUDA_CHECK(
      cudaSetDevice(inputs.empty() ? default_device().index : inputs[0].device().index));
  return backend_impl::eval_with<Families>(prim, inputs, params, out_avals);
}

}  // namespace flaxpp::cuda
