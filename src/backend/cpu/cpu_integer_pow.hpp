// The CPU's integer_pow over an array: kernels::IntegerPow's square-and-multiply with the
// exponent's bits walked once per block of elements instead of once per element, so that each
// step is a plain loop over the block, which vectorises. Every element sees the functor's
// operations in its order: the same bits.
#pragma once

#include <array>
#include <cstdint>

#include "flaxpp/kernels/elementwise.hpp"

namespace flaxpp::cpu {

template <class T>
void integer_pow_rows(std::int64_t y, const T* x, T* out, std::int64_t n) {
  constexpr std::int64_t kBlock = 256;
  const std::uint64_t magnitude =
      y < 0 ? std::uint64_t(0) - static_cast<std::uint64_t>(y) : static_cast<std::uint64_t>(y);
  std::array<T, kBlock> power;  // x, x^2, x^4, ... (a copy: `out` may be `x`)
  for (std::int64_t start = 0; start < n; start += kBlock) {
    const std::int64_t m = n - start < kBlock ? n - start : kBlock;
    T* acc = out + start;
    for (std::int64_t i = 0; i < m; ++i) {
      power[static_cast<std::size_t>(i)] = x[start + i];
      acc[i] = T(1);
    }
    for (std::uint64_t bits = magnitude; bits > 0;) {
      if (bits & 1u)
        for (std::int64_t i = 0; i < m; ++i)
          acc[i] = kernels::Mul{}(acc[i], power[static_cast<std::size_t>(i)]);
      bits >>= 1;
      if (bits > 0)
        for (std::int64_t i = 0; i < m; ++i)
          power[static_cast<std::size_t>(i)] = kernels::Mul{}(power[static_cast<std::size_t>(i)],
                                                              power[static_cast<std::size_t>(i)]);
    }
    if (y < 0)
      for (std::int64_t i = 0; i < m; ++i)
        acc[i] = kernels::Div{}(T(1), acc[i]);
  }
}

}  // namespace flaxpp::cpu
