// CUDA evaluation of the index primitives (kernels/indexing_kernels.cuh): iota, take and
// scatter_add. Their indices are checked on the host first (backend_impl::indexed_rows), which
// waits for the indices to be computed: flaxpp refuses out-of-range ids where JAX would give NaN
// rows or wrap, and a kernel cannot throw. scatter_add groups the updates by row on the host too
// (backend/index_plan.hpp), so each row takes its updates in index order without atomics.
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "backend/index_plan.hpp"
#include "kernels/indexing_kernels.cuh"

namespace flaxpp::cuda {
namespace {

// `values` as an int32 array on `device` (uploaded through the backend, which keeps the host
// copy valid until the upload is done).
Array int32_on(const std::vector<std::int32_t>& values, Device device) {
  return Array::from_vector(values, Shape{static_cast<std::int64_t>(values.size())}, device);
}

}  // namespace

Array Families::iota(const ir::Primitive& prim, std::span<const Array> /*in*/,
                     const ir::Params& params, const AVal& out) {
  const Device device = default_device();  // where eval_primitive runs operand-less primitives
  const backend_impl::IotaAxis axis =
      backend_impl::iota_axis(out.shape, params.get<std::int64_t>("dimension"));
  return visit_dtype<kNumeric | kHalf>(prim, out.dtype, device, [&]<class T>(TypeTag<T>) {
    const Output o(out, device);
    check_launch(kernels::launch_iota(o.data<T>(), out.shape.size(), axis.inner, axis.extent,
                                      static_cast<CudaBackend&>(backend(device)).stream()),
                 "iota");
    return o.array();
  });
}

Array Families::take(const ir::Primitive& prim, std::span<const Array> in,
                     const ir::Params& /*params*/, const AVal& out) {
  const Device device = in[0].device();
  const std::int64_t r = backend_impl::indexed_rows(prim, in).row_size;
  return visit_dtype<kAll | kHalf>(prim, out.dtype, device, [&]<class T>(TypeTag<T>) {
    const Output o(out, device);
    check_launch(kernels::launch_take(in_data<T>(in[0]), in_data<std::int32_t>(in[1]), in[1].size(),
                                      r, o.data<T>(), backend_of(in[0]).stream()),
                 "take");
    return o.array();
  });
}

Array Families::scatter_add(const ir::Primitive& prim, std::span<const Array> in,
                            const ir::Params& /*params*/, const AVal& out) {
  const Array& x = in[0];
  const backend_impl::IndexedRows checked = backend_impl::indexed_rows(prim, in);
  const backend_impl::RowGroups groups = backend_impl::group_by_row(checked.indices, x.shape()[0]);
  const Array rows = int32_on(groups.rows, x.device());
  const Array begin = int32_on(groups.begin, x.device());
  const Array order = int32_on(groups.order, x.device());
  return visit_dtype<kNumeric | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, x.device());
    const cudaStream_t stream = backend_of(x).stream();
    if (x.size() > 0)
      FLAXPP_CUDA_CHECK(cudaMemcpyAsync(o.data<T>(), in_data<T>(x),
                                        static_cast<std::size_t>(x.nbytes()),
                                        cudaMemcpyDeviceToDevice, stream));
    check_launch(kernels::launch_scatter_add(
                     in_data<std::int32_t>(rows), in_data<std::int32_t>(begin),
                     in_data<std::int32_t>(order), static_cast<std::int64_t>(groups.rows.size()),
                     in_data<T>(in[2]), checked.row_size, o.data<T>(), stream),
                 "scatter_add");
    return o.array();
  });
}

}  // namespace flaxpp::cuda
