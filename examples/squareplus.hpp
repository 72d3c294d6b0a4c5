// squareplus.hpp — the math of examples/extend_primitive.cpp's primitive, written once for its
// CPU loop and its CUDA kernel (as flaxpp's own kernels/elementwise.hpp functors are).
#pragma once

#include <cmath>

#ifdef __CUDACC__
#define SQUAREPLUS_HD __host__ __device__
#else
#define SQUAREPLUS_HD
#endif

// jax.nn.squareplus: (x + sqrt(x^2 + b)) / 2, each operation rounded to T as jnp's are.
struct Squareplus {
  double b;
  template <class T>
  SQUAREPLUS_HD T operator()(T x) const {
    using std::sqrt;
    return (x + sqrt(x * x + static_cast<T>(b))) / T(2);
  }
};

namespace flaxpp {
class Array;
namespace ir {
class Primitive;
}
}  // namespace flaxpp

// The CUDA implementation's registration (extend_primitive_cuda.cu, in CUDA builds).
void register_squareplus_cuda(const flaxpp::ir::Primitive& squareplus);
