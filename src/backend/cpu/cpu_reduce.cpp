// CPU evaluation of reduce_sum and reduce_max over any set of axes, each contiguous run folded
// as cpu_fold.hpp folds it.
#include <algorithm>

#include "backend/cpu/cpu_eval_impl.hpp"
#include "backend/cpu/cpu_fold.hpp"
#include "backend/cpu/cpu_parallel.hpp"
#include "flaxpp/kernels/elementwise.hpp"

namespace flaxpp::cpu {
namespace {

// Reduces x over `axes` into `out` (x's shape without those axes), starting from init.
// The operand is read once in row-major order; each step handles its innermost group
// either as a contiguous reduction (reduced) or as an elementwise accumulation into a
// contiguous run of the result (kept).
template <class T, class Op>
Array reduce(const Array& x, const std::vector<std::int64_t>& axes, const AVal& out, Op op,
             T init) {
  const Output o(out);
  T* ys = o.data<T>();
  std::fill(ys, ys + out.shape.size(), init);
  if (x.size() == 0) return o.array();

  const std::vector<backend_impl::ReduceGroup> groups =
      backend_impl::reduce_groups(x.shape().dims(), axes);

  // Result strides of the groups (0 for reduced ones), in row-major order of the kept ones.
  std::vector<std::int64_t> out_strides(groups.size(), 0);
  std::int64_t stride = 1;
  for (std::size_t g = groups.size(); g-- > 0;) {
    if (groups[g].reduced) continue;
    out_strides[g] = stride;
    stride *= groups[g].size;
  }

  const T* xs = in_data<T>(x);
  const backend_impl::ReduceGroup inner = groups.back();
  if (groups.size() == 2 && !groups[0].reduced && inner.reduced) {
    // Rows reduced along the last axes (a softmax's maximum and sum): one result per row, the
    // rows shared among the CPU's threads.
    parallel_rows(groups[0].size, inner.size, [&](std::int64_t begin, std::int64_t end) {
      fold_rows(op, xs + begin * inner.size, end - begin, inner.size, init, ys + begin);
    });
    return o.array();
  }
  if (groups.size() == 2 && groups[0].reduced && !inner.reduced) {
    // Leading axes reduced (a bias's gradient, a sum over the batch): the result's columns
    // shared among the CPU's threads, each folding its rows in order.
    parallel_columns(groups[0].size, inner.size, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = 0; r < groups[0].size; ++r) {
        const T* run = xs + r * inner.size;
        for (std::int64_t j = begin; j < end; ++j)
          ys[j] = op(ys[j], run[j]);
      }
    });
    return o.array();
  }
  const std::size_t outer_rank = groups.size() - 1;
  const std::int64_t outer = x.size() / inner.size;
  std::vector<std::int64_t> index(outer_rank, 0);
  std::int64_t out_offset = 0;
  for (std::int64_t step = 0; step < outer; ++step) {
    const T* run = xs + step * inner.size;  // (inner.size,)
    if (inner.reduced) {
      ys[out_offset] = op(ys[out_offset], reduce_contiguous(op, run, inner.size, init));
    } else {
      T* acc = ys + out_offset;  // (inner.size,)
      for (std::int64_t j = 0; j < inner.size; ++j)
        acc[j] = op(acc[j], run[j]);
    }
    for (std::size_t g = outer_rank; g-- > 0;) {
      out_offset += out_strides[g];
      if (++index[g] < groups[g].size) break;
      out_offset -= out_strides[g] * groups[g].size;
      index[g] = 0;
    }
  }
  return o.array();
}

}  // namespace

Array Families::reduce_sum(const ir::Primitive& prim, std::span<const Array> inputs,
                           const ir::Params& params, const AVal& out) {
  const auto& axes = params.get<std::vector<std::int64_t>>("axes");
  return visit_dtype<kNumeric>(prim, inputs[0].dtype(), [&]<class T>(TypeTag<T>) {
    return reduce(inputs[0], axes, out, kernels::Add{}, T(0));
  });
}

// NaN-propagating max (kernels::Max); an empty reduction gives -inf / the lowest integer.
Array Families::reduce_max(const ir::Primitive& prim, std::span<const Array> inputs,
                           const ir::Params& params, const AVal& out) {
  const auto& axes = params.get<std::vector<std::int64_t>>("axes");
  return visit_dtype<kNumeric>(prim, inputs[0].dtype(), [&]<class T>(TypeTag<T>) {
    return reduce(inputs[0], axes, out, kernels::Max{}, kernels::max_identity<T>());
  });
}

}  // namespace flaxpp::cpu
