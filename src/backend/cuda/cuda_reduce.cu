// CUDA evaluation of reduce_sum and reduce_max over any set of axes, planned by
// layout_plan.hpp's reduce_groups: rows (innermost axes reduced) and columns (outermost axes
// reduced) directly; any other pattern is first permuted to (kept, reduced) by a gather.
// f32 sums accumulate in f32 as on the CPU, in another order, so sums agree to rounding.
#include <algorithm>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "kernels/elementwise_kernels.cuh"
#include "kernels/reduce_kernels.cuh"

namespace flaxpp::cuda {
namespace {

using kernels::compute_t;
using kernels::grid_blocks;
using kernels::kBlockThreads;

template <class T, class Op>
Array reduce(const Array& x, const std::vector<std::int64_t>& axes, const AVal& out, Op op,
             compute_t<T> init) {
  const Output o(out, x.device());
  const std::int64_t out_size = out.shape.size();
  if (out_size == 0) return o.array();
  const cudaStream_t stream = backend_of(x).stream();
  if (x.size() == 0) {  // an empty reduction: the identity everywhere
    kernels::fill_kernel<<<grid_blocks(out_size), kBlockThreads, 0, stream>>>(
        kernels::store_as<T>(init), o.data<T>(), out_size);
    check_launch("fill");
    return o.array();
  }
  const std::vector<backend_impl::ReduceGroup> groups =
      backend_impl::reduce_groups(x.shape().dims(), axes);
  const T* rows_data = in_data<T>(x);
  if (groups.size() == 1 && !groups[0].reduced) {
    // Nothing is reduced (every reduced axis has size 1): the operand's values.
    FLAXPP_CUDA_CHECK(cudaMemcpyAsync(o.data<T>(), rows_data, static_cast<std::size_t>(x.nbytes()),
                                      cudaMemcpyDeviceToDevice, stream));
    return o.array();
  }
  if (groups.size() == 2 && groups[0].reduced) {  // (reduced, kept): columns
    const std::int64_t rows = groups[0].size, cols = groups[1].size;
    const dim3 block(kernels::kColumns, kernels::kRowLanes);
    const auto blocks = static_cast<unsigned>((cols + kernels::kColumns - 1) / kernels::kColumns);
    kernels::reduce_columns_kernel<<<blocks, block, 0, stream>>>(op, rows_data, rows, cols, init,
                                                                 o.data<T>());
    check_launch("reduce_columns");
    return o.array();
  }
  // Rows: the operand as (kept, reduced), permuted there first unless the reduced axes are
  // already innermost ((reduced) or (kept, reduced)).
  std::shared_ptr<Buffer> permuted;
  if (!(groups.back().reduced && groups.size() <= 2)) {
    std::vector<std::int64_t> order;
    const std::int64_t rank = x.rank();
    for (const bool reduced : {false, true})
      for (std::int64_t a = 0; a < rank; ++a)
        if ((std::find(axes.begin(), axes.end(), a) != axes.end()) == reduced) order.push_back(a);
    permuted = backend(x.device()).allocate(x.nbytes());
    gather_strided(rows_data, backend_impl::transpose_copy(x.shape().dims(), order), sizeof(T),
                   permuted->data(), stream);
    rows_data = static_cast<const T*>(permuted->data());
  }
  const std::int64_t cols = x.size() / out_size;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(out_size, 65536));
  kernels::reduce_rows_kernel<<<blocks, kBlockThreads, 0, stream>>>(op, rows_data, out_size, cols,
                                                                    init, o.data<T>());
  check_launch("reduce_rows");
  return o.array();  // `permuted` is freed in stream order, after the kernel has read it
}

}  // namespace

Array Families::reduce_sum(const ir::Primitive& prim, std::span<const Array> inputs,
                           const ir::Params& params, const AVal& out) {
  const Array& x = inputs[0];
  const auto& axes = params.get<std::vector<std::int64_t>>("axes");
  return visit_dtype<kNumeric | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    return reduce<T>(x, axes, out, kernels::Add{}, compute_t<T>(0));
  });
}

// NaN-propagating max (kernels::Max); an empty reduction gives -inf / the lowest integer.
Array Families::reduce_max(const ir::Primitive& prim, std::span<const Array> inputs,
                           const ir::Params& params, const AVal& out) {
  const Array& x = inputs[0];
  const auto& axes = params.get<std::vector<std::int64_t>>("axes");
  return visit_dtype<kNumeric | kHalf>(prim, x.dtype(), x.device(), [&]<class T>(TypeTag<T>) {
    return reduce<T>(x, axes, out, kernels::Max{}, kernels::max_identity<compute_t<T>>());
  });
}

}  // namespace flaxpp::cuda
