// pad and concatenate on the GPU (kernels/slicing_kernels.cuh): each operand written into its
// part of the result through layout_plan.hpp's placements; pad's value is read on the device,
// so nothing waits for the host (slice is a gather, eval_table.hpp).
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "kernels/slicing_kernels.cuh"

namespace flaxpp::cuda {
namespace {

template <class T>
void place(const T* in, const backend_impl::StridedPlacement& placement, T* out,
           cudaStream_t stream) {
  const backend_impl::StridedPlacement p = backend_impl::simplify(placement);
  const std::int64_t n = p.src.size();
  if (n == 0) return;
  const std::size_t rank = p.src.dims.size();
  if (rank > static_cast<std::size_t>(kernels::kMaxGatherRank))
    throw ValueError(detail::str("pad or concatenate with ", rank,
                                 " axes after merging; the CUDA backend handles up to ",
                                 kernels::kMaxGatherRank, ". Reshape to fewer axes first"));
  kernels::PlaceGeometry g{};
  g.rank = static_cast<int>(rank);
  g.src_offset = p.src.offset;
  g.dst_offset = p.dst_offset;
  for (std::size_t k = 0; k < rank; ++k) {
    g.dims[k] = p.src.dims[k];
    g.src_strides[k] = p.src.strides[k];
    g.dst_strides[k] = p.dst_strides[k];
  }
  check_launch(kernels::launch_place(in, g, out, n, stream), "place");
}

}  // namespace

Array Families::pad(const ir::Primitive& prim, std::span<const Array> in, const ir::Params& params,
                    const AVal& out) {
  const Array& x = in[0];
  const backend_impl::StridedPlacement p = backend_impl::pad_placement(
      x.shape().dims(), params.get<std::vector<std::int64_t>>("low"),
      params.get<std::vector<std::int64_t>>("interior"), out.shape.dims());
  const cudaStream_t stream = backend_of(x).stream();
  return visit_dtype<kAll | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, x.device());
    check_launch(
        kernels::launch_fill_from(in_data<T>(in[1]), o.data<T>(), out.shape.size(), stream),
        "fill_from");
    place(in_data<T>(x), p, o.data<T>(), stream);
    return o.array();
  });
}

Array Families::concatenate(const ir::Primitive& prim, std::span<const Array> in,
                            const ir::Params& params, const AVal& out) {
  const std::int64_t dimension = params.get<std::int64_t>("dimension");
  const Device device = in[0].device();
  const cudaStream_t stream = backend_of(in[0]).stream();
  return visit_dtype<kAll | kHalf>(prim, out.dtype, device, [&]<class T>(TypeTag<T>) {
    const Output o(out, device);
    std::int64_t start = 0;
    for (const Array& x : in) {
      place(
          in_data<T>(x),
          backend_impl::concatenate_placement(x.shape().dims(), dimension, start, out.shape.dims()),
          o.data<T>(), stream);
      start += x.shape()[dimension];
    }
    return o.array();
  });
}

}  // namespace flaxpp::cuda
