// flaxpp/kernels/sort_order.hpp — the order argsort sorts by, for the CPU and CUDA alike, as
// JAX's sorts order floating keys: a NaN is greater than every number (NaNs equal each other);
// -0.0 equals 0.0 for sort and argsort, and is below it for top_k (its total order, param
// signed_zeros). Equal keys keep their order: the caller breaks ties by position.
#ifndef FLAXPP_KERNELS_SORT_ORDER_HPP
#define FLAXPP_KERNELS_SORT_ORDER_HPP

#include <cmath>
#include <type_traits>

#include "flaxpp/kernels/hd.hpp"

namespace flaxpp::kernels {

// a < b in the ascending order.
template <class T>
FLAXPP_HD bool sort_less(T a, T b, bool signed_zeros) {
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) return !a_nan;
  if (a < b) return true;
  if constexpr (std::is_floating_point_v<T>) {
    if (signed_zeros && a == b && a == T(0)) return std::signbit(a) && !std::signbit(b);
  }
  return false;
}

// Whether key a goes before key b (a strict order; equal keys go by position).
template <class T>
FLAXPP_HD bool sorts_before(T a, T b, bool descending, bool signed_zeros) {
  return descending ? sort_less(b, a, signed_zeros) : sort_less(a, b, signed_zeros);
}

}  // namespace flaxpp::kernels

#endif  // FLAXPP_KERNELS_SORT_ORDER_HPP
