// Private to the CPU backend: y = op(x) over n elements for a unary functor of the elementwise
// list, the one loop the primitive (cpu_eval.cpp) and the fused programs
// (cpu_fused_elementwise.cpp) both run, so that they give the same bits. Some functors have
// loops of their own: float32 tanh, exp and integer_pow (cpu_math_loops.hpp), integer_pow of
// the other types by blocks (cpu_integer_pow.hpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "backend/cpu/cpu_integer_pow.hpp"
#include "backend/cpu/cpu_math_loops.hpp"
#include "flaxpp/kernels/elementwise.hpp"

namespace flaxpp::cpu {

template <class Op, class T>
void unary_loop(const Op& op, const T* x, T* y, std::int64_t n) {
  constexpr bool kF32 = std::is_same_v<T, float>;
  if constexpr (kF32 && std::is_same_v<Op, kernels::Tanh>) {
    tanh_f32(x, y, n);
  } else if constexpr (kF32 && std::is_same_v<Op, kernels::Exp>) {
    exp_f32(x, y, n);
  } else if constexpr (kF32 && std::is_same_v<Op, kernels::IntegerPow>) {
    integer_pow_f32(op.y, x, y, n);
  } else if constexpr (std::is_same_v<Op, kernels::IntegerPow>) {
    integer_pow_rows(op.y, x, y, n);
  } else {
    for (std::int64_t i = 0; i < n; ++i)
      y[i] = op(x[i]);
  }
}

}  // namespace flaxpp::cpu
