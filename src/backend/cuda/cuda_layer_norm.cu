// CUDA evaluation of the layer_norm primitives: cuDNN's LayerNorm (the graph API, in
// cudnn_layer_norm.cpp) for bf16/f16 when flaxpp was built with cuDNN and cuDNN accepts the
// configuration, otherwise flaxpp's kernels (kernels/layer_norm_kernels.cuh). float32 and
// float64 always take flaxpp's kernels: cuDNN computes the exact variance, where Flax (and the
// primitive) use the fast one, max(0, E[x^2] - mean^2); the two differ by ~1e-4 relative when
// |mean| >> std, more than float32 reference cases allow. In 16-bit storage the difference is
// below the rounding.
#include <algorithm>

#include "backend/cuda/cuda_eval.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "backend/cuda/cudnn_layer_norm.hpp"
#include "kernels/elementwise_kernels.cuh"
#include "kernels/layer_norm_kernels.cuh"

namespace flaxpp::cuda {
namespace {

using kernels::compute_t;

// Whether to try cuDNN for this configuration (16-bit storage; see above).
bool cudnn_candidate(CudaBackend& gpu, bool forward, DType dtype, std::int64_t rows,
                     std::int64_t f) {
  return cudnn_allowed() && is_half(dtype) &&
         cudnn_layer_norm_usable(gpu, forward, dtype, rows, f);
}

// Per-row statistics in buffers of compute_t<T> on x's device.
template <class T>
std::pair<std::shared_ptr<Buffer>, std::shared_ptr<Buffer>> row_stats(const Array& x,
                                                                      double epsilon) {
  using A = compute_t<T>;
  const auto [rows, f] = backend_impl::last_axis_rows(x.shape().dims());
  Backend& be = backend(x.device());
  auto mean = be.allocate(std::max<std::int64_t>(rows, 1) * std::int64_t(sizeof(A)));
  auto rstd = be.allocate(std::max<std::int64_t>(rows, 1) * std::int64_t(sizeof(A)));
  check_launch(kernels::launch_layer_norm_stats(in_data<T>(x), rows, f, static_cast<A>(epsilon),
                                                static_cast<A*>(mean->data()),
                                                static_cast<A*>(rstd->data()),
                                                backend_of(x).stream()),
               "layer_norm_stats");
  return {std::move(mean), std::move(rstd)};
}

// Float32 copies of (f,) parameters of element type T, for cuDNN plans that take only those.
template <class T>
ParamsAsFloat params_as_float(CudaBackend& gpu, std::int64_t f) {
  return [&gpu, f](const void* param) {
    std::shared_ptr<Buffer> copy = gpu.allocate(f * static_cast<std::int64_t>(sizeof(float)));
    check_launch(kernels::launch_convert(static_cast<const T*>(param),
                                         static_cast<float*>(copy->data()), f, gpu.stream()),
                 "convert_element_type");
    return copy;
  };
}

}  // namespace

namespace {

// layer_norm (forward) and layer_norm_dx: operands (x, scale, bias or dy) and a row-wise
// kernel; `try_cudnn(gpu, rows, f, epsilon, out)` runs cuDNN first where it may and says
// whether it did.
template <class TryCudnn>
Array by_rows(const ir::Primitive& prim, std::span<const Array> in, const ir::Params& params,
              const AVal& out, bool forward, TryCudnn try_cudnn) {
  const Array& x = in[0];
  const double epsilon = params.get<double>("epsilon");
  return visit_dtype<kFloat | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const auto [rows, f] = backend_impl::last_axis_rows(x.shape().dims());
    const Output o(out, x.device());
    if (rows == 0) return o.array();
    CudaBackend& gpu = backend_of(x);
    if (cudnn_candidate(gpu, forward, x.dtype(), rows, f) &&
        try_cudnn(TypeTag<T>{}, gpu, rows, f, epsilon, o.data<void>()))
      return o.array();
    const auto launch = forward ? kernels::launch_layer_norm<T> : kernels::launch_layer_norm_dx<T>;
    check_launch(launch(in_data<T>(x), in_data<T>(in[1]), in_data<T>(in[2]), rows, f,
                        static_cast<compute_t<T>>(epsilon), o.data<T>(), gpu.stream()),
                 prim.name().c_str());
    return o.array();
  });
}

}  // namespace

Array Families::layer_norm(const ir::Primitive& prim, std::span<const Array> in,
                           const ir::Params& params, const AVal& out) {
  return by_rows(
      prim, in, params, out, true,
      [&]<class T>(TypeTag<T>, CudaBackend& gpu, std::int64_t rows, std::int64_t f, double epsilon,
                   void* y) {
        // cuDNN's training phase also writes the statistics; they are not kept.
        auto mean = gpu.allocate(rows * 4), inv_var = gpu.allocate(rows * 4);
        return cudnn_layer_norm_forward(gpu, in[0].dtype(), rows, f, in[0].buffer().data(),
                                        in[1].buffer().data(), in[2].buffer().data(), epsilon, y,
                                        mean->data(), inv_var->data(), params_as_float<T>(gpu, f));
      });
}

Array Families::layer_norm_dx(const ir::Primitive& prim, std::span<const Array> in,
                              const ir::Params& params, const AVal& out) {
  return by_rows(prim, in, params, out, false,
                           [&]<class T>(TypeTag<T>, CudaBackend& gpu, std::int64_t rows,
                                        std::int64_t f, double epsilon, void* dx) {
                             // cuDNN's backward takes the forward statistics (float32 for these
                             // dtypes) and also writes dscale and dbias, which layer_norm_dscale
                             // and reduce_sum compute.
                             const auto [mean, rstd] = row_stats<T>(in[0], epsilon);
                             auto dscale = gpu.allocate(f * 4), dbias = gpu.allocate(f * 4);
                             return cudnn_layer_norm_dx(
                                 gpu, in[0].dtype(), rows, f, in[0].buffer().data(),
                                 in[1].buffer().data(), in[2].buffer().data(), mean->data(),
                                 rstd->data(), dx, dscale->data(), dbias->data(),
                                 params_as_float<T>(gpu, f));
                           });
}

Array Families::layer_norm_dscale(const ir::Primitive& prim, std::span<const Array> in,
                                  const ir::Params& params, const AVal& out) {
  const Array& x = in[0];
  const double epsilon = params.get<double>("epsilon");
  return visit_dtype<kFloat | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    using A = compute_t<T>;
    const auto [rows, f] = backend_impl::last_axis_rows(x.shape().dims());
    const Output o(out, x.device());
    if (f == 0) return o.array();
    const auto [mean, rstd] = row_stats<T>(x, epsilon);
    const cudaStream_t stream = backend_of(x).stream();
    const auto* m = static_cast<const A*>(mean->data());
    const auto* r = static_cast<const A*>(rstd->data());
    const kernels::ColumnReducePlan plan = kernels::plan_column_reduce(rows, f);
    if (plan.chunks == 1) {
      check_launch(kernels::launch_layer_norm_dscale(in_data<T>(x), in_data<T>(in[1]), m, r, rows,
                                                     f, plan, o.data<T>(), stream),
                   "layer_norm_dscale");
      return o.array();
    }
    // (chunks, f) partial sums over row chunks, then their columns summed.
    const std::shared_ptr<Buffer> partial =
        backend(x.device()).allocate(plan.chunks * f * static_cast<std::int64_t>(sizeof(A)));
    A* p = static_cast<A*>(partial->data());
    check_launch(kernels::launch_layer_norm_dscale(in_data<T>(x), in_data<T>(in[1]), m, r, rows, f,
                                                   plan, p, stream),
                 "layer_norm_dscale_chunks");
    check_launch(kernels::launch_reduce_columns(kernels::Add{}, static_cast<const A*>(p),
                                                plan.chunks, f, plan.chunks, 1, A(0), o.data<T>(),
                                                stream),
                 "reduce_columns");
    return o.array();
  });
}

}  // namespace flaxpp::cuda
