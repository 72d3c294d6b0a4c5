// The strided gather (of layout_plan.hpp's plans) on the GPU: the layout primitives
// broadcast_in_dim, reshape and transpose (eval_table.hpp) and dot_general's operand
// permutation.
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "kernels/gather_kernel.cuh"

namespace flaxpp::cuda {
namespace {

using kernels::grid_blocks;
using kernels::kBlockThreads;

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
  const std::int64_t rows = rank == 2 ? simple.dims[0] : 0, cols = rank == 2 ? simple.dims[1] : 0;
  const std::int64_t row_tiles = (rows + kernels::kTransposeTile - 1) / kernels::kTransposeTile;
  if (rank == 2 && simple.strides[0] == 1 && simple.strides[1] == rows && row_tiles <= 65535) {
    const dim3 grid(
        static_cast<unsigned>((cols + kernels::kTransposeTile - 1) / kernels::kTransposeTile),
        static_cast<unsigned>(row_tiles));
    const dim3 block(kernels::kTransposeTile, kernels::kTransposeRows);
    kernels::transpose_2d_kernel<<<grid, block, 0, stream>>>(in, rows, cols, out);
    check_launch("transpose_2d");
    return;
  }
  if (rank > static_cast<std::size_t>(kernels::kMaxGatherRank))
    throw ValueError(detail::str("a strided copy of rank ", rank,
                                 " after merging axes; the CUDA backend handles up to ",
                                 kernels::kMaxGatherRank, ". Reshape to fewer axes first"));
  if (n <= kernels::FastDivmod::kMaxDividend) {
    kernels::FastGatherGeometry g{};
    g.rank = static_cast<int>(rank);
    for (std::size_t k = 0; k < rank; ++k) {
      g.dims[k] = kernels::FastDivmod(static_cast<std::uint32_t>(simple.dims[k]));
      g.strides[k] = simple.strides[k];
    }
    kernels::gather_fast_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(in, g, out, n);
    check_launch("gather");
    return;
  }
  kernels::GatherGeometry g{};
  g.rank = static_cast<int>(rank);
  for (std::size_t k = 0; k < rank; ++k) {
    g.dims[k] = simple.dims[k];
    g.strides[k] = simple.strides[k];
  }
  kernels::gather_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(in, g, out, n);
  check_launch("gather");
}

}  // namespace

void gather_strided(const void* in, const backend_impl::StridedCopy& copy, std::size_t itemsize,
                    void* out, cudaStream_t stream) {
  if (copy.size() == 0) return;
  const backend_impl::StridedCopy simple = backend_impl::simplify(copy);
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
