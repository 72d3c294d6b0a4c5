// The CPU's integer_pow over an array: kernels::IntegerPow's square-and-multiply with the
// exponent's bits walked once per block of elements instead of once per element, so that each
// step is a plain loop over the block, which vectorises. Every element sees the functor's
// operations in its order, but for its first product, 1 * x, which is x exactly: the same
// bits.
#pragma once

#include <array>
#include <cstdint>

#include "flaxpp/kernels/elementwise.hpp"

namespace flaxpp::cpu {

// Always inlined, so that each clone of a caller (cpu_math_loops.cpp) compiles it for its own
// instruction set.
template <class T>
[[gnu::always_inline]] inline void integer_pow_rows(std::int64_t y, const T* x, T* out,
                                                    std::int64_t n) {
  constexpr std::int64_t kBlock = 256;
  const std::uint64_t magnitude =
      y < 0 ? std::uint64_t(0) - static_cast<std::uint64_t>(y) : static_cast<std::uint64_t>(y);
  // x^2, x^4, ... `out` may be `x`: x is read only while acc is x itself or not yet written.
  std::array<T, kBlock> power;
  for (std::int64_t start = 0; start < n; start += kBlock) {
    const std::int64_t m = n - start < kBlock ? n - start : kBlock;
    T* acc = out + start;
    // The functor's acc starts at 1 and its first product is 1 * p, which is p exactly: acc
    // takes p instead, one pass less, and x is not copied.
    const T* p = x + start;
    bool started = false;
    for (std::uint64_t bits = magnitude; bits > 0;) {
      if (bits & 1u) {
        if (!started && p != acc)
          for (std::int64_t i = 0; i < m; ++i)
            acc[i] = p[i];
        else if (started)
          for (std::int64_t i = 0; i < m; ++i)
            acc[i] = kernels::Mul{}(acc[i], p[i]);
        started = true;
      }
      bits >>= 1;
      if (bits > 0) {
        for (std::int64_t i = 0; i < m; ++i)
          power[static_cast<std::size_t>(i)] = kernels::Mul{}(p[i], p[i]);
        p = power.data();
      }
    }
    if (!started)
      for (std::int64_t i = 0; i < m; ++i)
        acc[i] = T(1);
    if (y < 0)
      for (std::int64_t i = 0; i < m; ++i)
        acc[i] = kernels::Div{}(T(1), acc[i]);
  }
}

}  // namespace flaxpp::cpu
