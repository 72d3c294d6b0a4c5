// The strided gather (of layout_plan.hpp's plans) on the GPU: the layout primitives
// broadcast_in_dim, reshape, transpose and slice (eval_table.hpp) and dot_general's operand
// permutation.
#include <cstddef>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "kernels/gather_kernel.cuh"

namespace flaxpp::cuda {
namespace {

template <class T>
void gather_t(const T* in, const backend_impl::StridedCopy& simple, T* out, cudaStream_t stream) {
  const std::int64_t n = simple.size();
  const std::size_t rank = simple.dims.size();
  // A contiguous run: a plain device-to-device copy.
  if (rank == 0 || (rank == 1 && simple.strides[0] == 1)) {
    FLAXPP_CUDA_CHECK(cudaMemcpyAsync(out, in, static_cast<std::size_t>(n) * sizeof(T),
                                      cudaMemcpyDeviceToDevice, stream));
    return;
  }
  // A 2-D transpose (result (rows, cols) reads the operand (cols, rows)): tiled.
  if (rank == 2 && simple.strides[0] == 1 && simple.strides[1] == simple.dims[0] &&
      kernels::transpose_fits(simple.dims[0])) {
    check_launch(
        kernels::launch_transpose_2d(in, simple.dims[0], simple.dims[1], out, stream),
        "transpose_2d");
    return;
  }
  if (rank > static_cast<std::size_t>(kernels::kMaxGatherRank))
    throw ValueError(detail::str("a strided copy of rank ", rank,
                                 " after merging axes; the CUDA backend handles up to ",
                                 kernels::kMaxGatherRank, ". Reshape to fewer axes first"));
  check_launch(kernels::launch_gather(in, simple.dims.data(), simple.strides.data(),
                                      static_cast<int>(rank), out, n, stream),
               "gather");
}

}  // namespace

void gather_strided(const void* in, const backend_impl::StridedCopy& copy, std::size_t itemsize,
                    void* out, cudaStream_t stream) {
  if (copy.size() == 0) return;
  const backend_impl::StridedCopy simple = backend_impl::simplify(copy);
  in = static_cast<const std::byte*>(in) + simple.offset * static_cast<std::int64_t>(itemsize);
  switch (itemsize) {
    case 1:
      return gather_t(static_cast<const std::uint8_t*>(in), simple, static_cast<std::uint8_t*>(out),
                      stream);
    case 2:
      return gather_t(static_cast<const std::uint16_t*>(in), simple,
                      static_cast<std::uint16_t*>(out), stream);
    case 4:
      return gather_t(static_cast<const std::uint32_t*>(in), simple,
                      static_cast<std::uint32_t*>(out), stream);
    case 8:
      return gather_t(static_cast<const std::uint64_t*>(in), simple,
                      static_cast<std::uint64_t*>(out), stream);
    default:
      FLAXPP_ASSERT(false, "gather_strided: itemsize ", itemsize);
  }
}

Array Families::gather(const ir::Primitive& prim, const Array& x,
                       const backend_impl::StridedCopy& copy, const AVal& out) {
  return visit_dtype<kAll | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    const Output o(out, x.device());
    gather_strided(in_data<T>(x), copy, sizeof(T), o.data<T>(), backend_of(x).stream());
    return o.array();
  });
}

}  // namespace flaxpp::cuda
