// pad, concatenate, dynamic_slice and dynamic_update_slice on the GPU
// (kernels/slicing_kernels.cuh): each operand written into its part of the result through
// layout_plan.hpp's placements; pad's value and the dynamic start indices are read on the
// device, so nothing waits for the host (slice is a gather, eval_table.hpp).
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

// The block of `block_dims` in an array of `dims`, its starts the 0-d arrays in[first...].
kernels::BlockGeometry block_geometry(std::span<const Array> in, std::size_t first,
                                      std::span<const std::int64_t> dims,
                                      std::span<const std::int64_t> block_dims) {
  if (dims.size() > static_cast<std::size_t>(kernels::kMaxGatherRank))
    throw ValueError(detail::str("a dynamic slice of rank ", dims.size(),
                                 "; the CUDA backend handles up to ", kernels::kMaxGatherRank,
                                 ". Reshape to fewer axes first"));
  const std::vector<std::int64_t> strides = backend_impl::row_major_strides(dims);
  kernels::BlockGeometry g{};
  g.rank = static_cast<int>(dims.size());
  for (std::size_t k = 0; k < dims.size(); ++k) {
    g.dims[k] = block_dims[k];
    g.strides[k] = strides[k];
    g.outer_dims[k] = dims[k];
    g.starts[k] = in_data<std::int32_t>(in[first + k]);
  }
  return g;
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
    std::vector<std::int64_t> starts(static_cast<std::size_t>(out.shape.rank()), 0);
    for (const Array& x : in) {
      place(in_data<T>(x),
            backend_impl::block_placement(x.shape().dims(), starts, out.shape.dims()), o.data<T>(),
            stream);
      starts[static_cast<std::size_t>(dimension)] += x.shape()[dimension];
    }
    return o.array();
  });
}

Array Families::dynamic_slice(const ir::Primitive& prim, std::span<const Array> in,
                              const ir::Params& /*params*/, const AVal& out) {
  const Array& x = in[0];
  const kernels::BlockGeometry g = block_geometry(in, 1, x.shape().dims(), out.shape.dims());
  return visit_dtype<kAll | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, x.device());
    check_launch(kernels::launch_dynamic_slice(in_data<T>(x), g, o.data<T>(), out.shape.size(),
                                               backend_of(x).stream()),
                 "dynamic_slice");
    return o.array();
  });
}

Array Families::dynamic_update_slice(const ir::Primitive& prim, std::span<const Array> in,
                                     const ir::Params& /*params*/, const AVal& out) {
  const Array &x = in[0], &update = in[1];
  const kernels::BlockGeometry g = block_geometry(in, 2, x.shape().dims(), update.shape().dims());
  const cudaStream_t stream = backend_of(x).stream();
  return visit_dtype<kAll | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, x.device());
    if (x.size() > 0)
      FLAXPP_CUDA_CHECK(cudaMemcpyAsync(o.data<T>(), in_data<T>(x),
                                        static_cast<std::size_t>(x.nbytes()),
                                        cudaMemcpyDeviceToDevice, stream));
    check_launch(
        kernels::launch_dynamic_update(in_data<T>(update), g, o.data<T>(), update.size(), stream),
        "dynamic_update_slice");
    return o.array();
  });
}

}  // namespace flaxpp::cuda
