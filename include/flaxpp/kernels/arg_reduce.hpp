// flaxpp/kernels/arg_reduce.hpp — the choice argmax and argmin make, for the CPU and CUDA
// alike: walking a line in order from its first element, a new element replaces the best so
// far when it is strictly better, so ties keep the first index; a NaN is better than any
// number and than no later NaN, so the first NaN wins (jax.lax.argmax's reducer, run in order).
#ifndef FLAXPP_KERNELS_ARG_REDUCE_HPP
#define FLAXPP_KERNELS_ARG_REDUCE_HPP

#include "flaxpp/kernels/hd.hpp"

namespace flaxpp::kernels {

struct ArgmaxBetter {
  template <class T>
  FLAXPP_HD bool operator()(T v, T best) const {
    return v > best || (v != v && !(best != best));
  }
};

struct ArgminBetter {
  template <class T>
  FLAXPP_HD bool operator()(T v, T best) const {
    return v < best || (v != v && !(best != best));
  }
};

}  // namespace flaxpp::kernels

#endif  // FLAXPP_KERNELS_ARG_REDUCE_HPP
