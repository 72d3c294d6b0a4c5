// CUDA evaluation of the index primitives (kernels/indexing_kernels.cuh): iota, take and
// scatter_add. Nothing reads the indices back to the host, so Embed models record into CUDA
// graphs: the kernels check every index themselves, and the backend raises flaxpp's error for
// a bad one at its next synchronisation (cuda_index_faults.hpp). scatter_add groups its
// updates by row on the device (a stable radix sort of the positions by row), so each row
// takes its updates in index order without atomics: the CPU's order and sums.
#include <algorithm>
#include <limits>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "backend/index_plan.hpp"
#include "kernels/indexing_kernels.cuh"

namespace flaxpp::cuda {

using backend_impl::row_elements;

namespace {

// Operands without rows, or with rows of no elements, leave the kernels nothing to check the
// indices against or nothing to launch for: the host checks them there (reading them back), as
// the CPU does. True where it did, and the result holds no element read through an index.
bool checked_on_host(const ir::Primitive& prim, std::span<const Array> in) {
  const Shape& x = in[0].shape();
  if (in[1].size() == 0 || (x[0] > 0 && row_elements(x) > 0)) return false;
  (void)backend_impl::indexed_rows(prim, in);
  return true;
}

}  // namespace

Array Families::iota(const ir::Primitive& prim, std::span<const Array> /*in*/,
                     const ir::Params& params, const AVal& out) {
  const Device device = default_device();  // where eval_primitive runs operand-less primitives
  // Element i's value is (i / inner) % extent.
  const backend_impl::AxisLines axis =
      backend_impl::axis_lines(out.shape.dims(), params.get<std::int64_t>("dimension"));
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
  CudaBackend& b = backend_of(in[0]);
  const bool on_host = checked_on_host(prim, in);
  return visit_dtype<kAll | kHalf>(prim, out.dtype, device, [&]<class T>(TypeTag<T>) {
    const Output o(out, device);
    if (on_host) return o.array();  // no element to take
    check_launch(kernels::launch_take(in_data<T>(in[0]), in[0].shape()[0],
                                      in_data<std::int32_t>(in[1]), in[1].size(), row_elements(in[0].shape()),
                                      o.data<T>(), b.index_faults().device(), b.stream()),
                 "take");
    return o.array();
  });
}

Array Families::scatter_add(const ir::Primitive& prim, std::span<const Array> in,
                            const ir::Params& /*params*/, const AVal& out) {
  const Array& x = in[0];
  const std::int64_t m = in[1].size(), rows = x.shape()[0];
  if (m > std::numeric_limits<std::int32_t>::max())
    throw ValueError(detail::str("scatter_add on the GPU: ", m, " indices; at most 2^31 - 1 "
                                 "are supported (the positions are int32): split the update"));
  if (checked_on_host(prim, in)) return x;  // no element to add to
  CudaBackend& b = backend_of(x);
  const cudaStream_t stream = b.stream();
  // The grouping's buffers: stream-ordered like any array, so they record into graphs too.
  std::size_t sort_bytes = 0;
  FLAXPP_CUDA_CHECK(kernels::scatter_add_sort_bytes(m, rows, sort_bytes));
  auto int32s = [&](std::int64_t n) { return b.allocate(std::max<std::int64_t>(n, 1) * 4); };
  const auto keys = int32s(m), positions = int32s(m), sorted = int32s(m), order = int32s(m),
             begin = int32s(rows + 1);
  const auto scratch = b.allocate(static_cast<std::int64_t>(std::max<std::size_t>(sort_bytes, 1)));
  auto i32 = [](const std::shared_ptr<Buffer>& buf) { return static_cast<std::int32_t*>(buf->data()); };
  const kernels::ScatterAddGroups groups{i32(keys),   i32(positions), i32(sorted),     i32(order),
                                         i32(begin), scratch->data(), sort_bytes};
  return visit_dtype<kNumeric | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, x.device());
    if (x.size() > 0)
      FLAXPP_CUDA_CHECK(cudaMemcpyAsync(o.data<T>(), in_data<T>(x),
                                        static_cast<std::size_t>(x.nbytes()),
                                        cudaMemcpyDeviceToDevice, stream));
    check_launch(kernels::launch_scatter_add(in_data<std::int32_t>(in[1]), m, rows,
                                             in_data<T>(in[2]), row_elements(x.shape()), o.data<T>(), groups,
                                             b.index_faults().device(), stream),
                 "scatter_add");
    return o.array();
  });
}

}  // namespace flaxpp::cuda
