// squareplus.hpp — the math of examples/extend_primitive.cpp's primitive, written once for its
// CPU loop and its CUDA kernel (as flaxpp's own flaxpp/kernels/elementwise.hpp functors are), and the
// evaluator around both.
#pragma once

#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include <flaxpp/core/array.hpp>
#include <flaxpp/core/backend.hpp>
#include <flaxpp/core/error.hpp>
#include <flaxpp/ir/primitive.hpp>

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

// The evaluator both kernels share: the result's buffer, and run(T{}, x, out, f) for a float32
// or float64 operand: the CPU loop or the CUDA launch.
template <class Run>
std::vector<flaxpp::Array> evaluate_squareplus(std::span<const flaxpp::Array> in,
                                               const flaxpp::ir::Params& params,
                                               std::span<const flaxpp::AVal> out, Run run) {
  const flaxpp::Array& x = in[0];
  const std::shared_ptr<flaxpp::Buffer> buffer = flaxpp::backend(x.device()).allocate(x.nbytes());
  const Squareplus f{params.get<double>("b")};
  if (x.dtype() == flaxpp::DType::f32) {
    run(float{}, x, *buffer, f);
  } else if (x.dtype() == flaxpp::DType::f64) {
    run(double{}, x, *buffer, f);
  } else {
    throw flaxpp::ValueError("squareplus: its kernels take float32 and float64");
  }
  return {flaxpp::Array(buffer, out[0].shape, out[0].dtype)};
}

// The CUDA implementation's registration (extend_primitive_cuda.cu, in CUDA builds).
void register_squareplus_cuda(const flaxpp::ir::Primitive& squareplus);
