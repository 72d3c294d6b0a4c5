// Private to the CPU backend: how reduce_sum and reduce_max fold a contiguous run of elements,
// shared by their kernel (cpu_reduce.cpp) and by fused programs' row reductions
// (cpu_fused_elementwise.cpp), so that both give the same bits. Sums accumulate in the element
// type (f32 in f32, like XLA on CPU), in eight interleaved partial sums.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cpu/cpu_row_max.hpp"
#include "flaxpp/kernels/elementwise.hpp"

namespace flaxpp::cpu {

// The op-fold of a run of elements, given in pieces: eight independent accumulators let the
// loop vectorise without reassociation flags (and shorten float sums' error chain); they are
// combined in order, then the elements after the last whole eight.
template <class T, class Op>
class LaneFold {
 public:
  static constexpr int kLanes = 8;
  LaneFold(Op op, T init) : op_(op), init_(init) { std::fill(acc_, acc_ + kLanes, init); }

  // Folds the next n elements; every piece but the last must be a multiple of kLanes long.
  // Returns the whole run's fold after its last piece (`last`), else init.
  T add(const T* x, std::int64_t n, bool last) {
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int l = 0; l < kLanes; ++l)
        acc_[l] = op_(acc_[l], x[i + l]);
    if (!last) return init_;
    T result = init_;
    for (int l = 0; l < kLanes; ++l)
      result = op_(result, acc_[l]);
    for (; i < n; ++i)
      result = op_(result, x[i]);
    return result;
  }

 private:
  Op op_;
  T init_;
  T acc_[kLanes];
};

// op-reduction of n contiguous elements, starting from init.
template <class T, class Op>
T reduce_contiguous(Op op, const T* x, std::int64_t n, T init) {
  return LaneFold<T, Op>(op, init).add(x, n, true);
}

// y[r] = op(init, the fold of x[r*n .. r*n + n)) for r < rows: a reduction along the last axes
// (float32 maxima by the vectorised max_rows_f32, which gives the same values).
template <class T, class Op>
void fold_rows(Op op, const T* x, std::int64_t rows, std::int64_t n, T init, T* y) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<Op, kernels::Max>) {
    max_rows_f32(x, rows, n, y);
  } else {
    for (std::int64_t r = 0; r < rows; ++r)
      y[r] = op(init, reduce_contiguous(op, x + r * n, n, init));
  }
}

}  // namespace flaxpp::cpu
