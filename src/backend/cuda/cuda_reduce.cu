// CUDA evaluation of reduce_sum and reduce_max over any set of axes, planned by
// layout_plan.hpp's reduce_groups: rows (innermost axes reduced) and columns (outermost axes
// reduced) directly; any other pattern is first permuted to (kept, reduced) by a gather.
// f32 sums accumulate in f32 as on the CPU, in another order, so sums agree to rounding.
// Long reductions with few results (a full sum, a bias gradient over many rows) are split over
// many blocks and their partials combined by a second launch (kernels/launch_geometry.hpp).
#include <algorithm>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "kernels/fill.hpp"
#include "kernels/reduce_kernels.cuh"

namespace flaxpp::cuda {
namespace {

using kernels::compute_t;

// The rows of a (rows, cols) array x reduced into out[rows], as plan_row_reduce lays them out.
template <class Op, class T>
void reduce_rows(Op op, const T* x, std::int64_t rows, std::int64_t cols, compute_t<T> init,
                 T* out, Backend& be, cudaStream_t stream) {
  using A = compute_t<T>;
  const kernels::RowReducePlan plan = kernels::plan_row_reduce(rows, cols);
  switch (plan.kind) {
    case kernels::RowReducePlan::Kind::warp_per_row:
      return check_launch(kernels::launch_reduce_rows_warp(op, x, rows, cols, init, out, stream),
                          "reduce_rows_warp");
    case kernels::RowReducePlan::Kind::block_per_row:
      return check_launch(kernels::launch_reduce_rows_block(op, x, rows, cols, init, out, stream),
                          "reduce_rows");
    case kernels::RowReducePlan::Kind::split:
      break;
  }
  // (rows, chunks) partial results, then each row of them reduced by a warp (chunks is at most
  // kernels::kTargetBlocks).
  const std::shared_ptr<Buffer> partial =
      be.allocate(rows * plan.chunks * static_cast<std::int64_t>(sizeof(A)));
  A* p = static_cast<A*>(partial->data());
  check_launch(kernels::launch_reduce_row_chunks(op, x, rows, cols, plan, init, p, stream),
               "reduce_row_chunks");
  check_launch(kernels::launch_reduce_rows_warp(op, static_cast<const A*>(p), rows, plan.chunks,
                                                init, out, stream),
               "reduce_rows_warp");
}  // `partial` is freed in stream order, after the second launch has read it

// The columns of a (rows, cols) array x reduced into out[cols], as plan_column_reduce lays them
// out.
template <class Op, class T>
void reduce_columns(Op op, const T* x, std::int64_t rows, std::int64_t cols, compute_t<T> init,
                    T* out, Backend& be, cudaStream_t stream) {
  using A = compute_t<T>;
  const kernels::ColumnReducePlan plan = kernels::plan_column_reduce(rows, cols);
  if (plan.chunks == 1)
    return check_launch(kernels::launch_reduce_columns(op, x, rows, cols, plan.rows_per_chunk, 1,
                                                       init, out, stream),
                        "reduce_columns");
  // (chunks, cols) partial results, then their columns reduced in one chunk.
  const std::shared_ptr<Buffer> partial =
      be.allocate(plan.chunks * cols * static_cast<std::int64_t>(sizeof(A)));
  A* p = static_cast<A*>(partial->data());
  check_launch(kernels::launch_reduce_columns(op, x, rows, cols, plan.rows_per_chunk, plan.chunks,
                                              init, p, stream),
               "reduce_column_chunks");
  check_launch(kernels::launch_reduce_columns(op, static_cast<const A*>(p), plan.chunks, cols,
                                              plan.chunks, 1, init, out, stream),
               "reduce_columns");
}

template <class T, class Op>
Array reduce(const Array& x, const std::vector<std::int64_t>& axes, const AVal& out, Op op,
             compute_t<T> init) {
  const Output o(out, x.device());
  const std::int64_t out_size = out.shape.size();
  if (out_size == 0) return o.array();
  Backend& be = backend(x.device());
  const cudaStream_t stream = backend_of(x).stream();
  if (x.size() == 0) {  // an empty reduction: the identity everywhere
    const T identity = kernels::store_as<T>(init);
    check_launch(kernels::launch_fill(o.data<T>(), &identity, sizeof(T), out_size, stream), "fill");
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
    reduce_columns(op, rows_data, groups[0].size, groups[1].size, init, o.data<T>(), be, stream);
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
    permuted = be.allocate(x.nbytes());
    gather_strided(rows_data, backend_impl::transpose_copy(x.shape().dims(), order), sizeof(T),
                   permuted->data(), stream);
    rows_data = static_cast<const T*>(permuted->data());
  }
  reduce_rows(op, rows_data, out_size, x.size() / out_size, init, o.data<T>(), be, stream);
  return o.array();  // `permuted` is freed in stream order, after the kernels have read it
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
