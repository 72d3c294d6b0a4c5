// extend_primitive: a primitive defined outside flaxpp, with its own CPU loop and CUDA kernel
// (docs/EXTENDING.md), here JAX's squareplus activation:
//
//   jax.nn.squareplus(x, b=4)  # (x + sqrt(x**2 + b)) / 2, gradient (1 + x / sqrt(x**2 + b)) / 2
//
// The primitive has a shape rule and a VJP rule (written with flaxpp ops, so it traces and
// remats like any other); ir::register_impl gives it a kernel per device kind. It is checked
// against the same math composed from flaxpp ops: equal values, close gradients, and equal
// values again inside jit. Fails otherwise.
#include <flaxpp/flaxpp.hpp>
#include <iostream>

#include "squareplus.hpp"
#include "verdict.hpp"

using namespace flaxpp;

// The primitive: one floating operand, param "b"; its result has the operand's aval.
const ir::Primitive squareplus_p(
    "squareplus",
    [](std::span<const AVal> in, const ir::Params& /*params*/) {
      if (in.size() != 1 || !is_floating(in[0].dtype))
        throw ValueError("squareplus takes one floating array");
      return std::vector<AVal>{in[0]};
    },
    [](const ir::VjpArgs& a) {  // g * (1 + x / sqrt(x^2 + b)) / 2
      const Array& x = a.inputs[0];
      const double b = a.params.get<double>("b");
      return std::vector<Array>{a.cotangents[0] * (1.0 + x * lax::rsqrt(x * x + b)) * 0.5};
    });

Array squareplus(const Array& x, double b = 4.0) {
  const Array in[] = {x};
  return ir::bind1(squareplus_p, in, {{"b", b}});
}

// The CPU kernel: the functor over the operand's elements.
std::vector<Array> squareplus_cpu(const ir::Primitive& /*prim*/, std::span<const Array> in,
                                  const ir::Params& params, std::span<const AVal> out) {
  return evaluate_squareplus(in, params, out,
                             []<class T>(T, const Array& x, Buffer& result, Squareplus f) {
                               const T* xs = static_cast<const T*>(x.buffer().data());
                               T* ys = static_cast<T*>(result.data());
                               for (std::int64_t i = 0; i < x.size(); ++i)
                                 ys[i] = f(xs[i]);
                             });
}

int main() try {
  ir::register_impl(squareplus_p, DeviceKind::cpu, squareplus_cpu);
#ifdef SQUAREPLUS_WITH_CUDA
  register_squareplus_cuda(squareplus_p);
#endif
  const auto composed = [](const Array& x) { return (x + sqrt(x * x + 4.0)) / 2.0; };
  const Array x = Array::from_vector(std::vector<float>{-3.0f, -0.5f, 0.0f, 0.7f, 2.0f}, Shape{5});
  const Array y = squareplus(x), want = composed(x);
  const Array g = grad([](const Array& v) { return sum(squareplus(v)); })(x);
  const Array g_want = grad([&](const Array& v) { return sum(composed(v)); })(x);
  const auto jitted = jit([](const Array& v) { return squareplus(v) * 2.0; });
  const Array yj = jitted(x);
  std::cout << "squareplus on " << x.device() << ": " << y << "\ngradient " << g << "\n";
  const std::vector<float> gv = g.to_vector<float>(), gw = g_want.to_vector<float>();
  bool close = true;
  for (std::size_t i = 0; i < gv.size(); ++i)
    close = close && std::abs(gv[i] - gw[i]) <= 1e-6f * (1.0f + std::abs(gw[i]));
  return verdict(y.to_vector<float>() == want.to_vector<float>() && close &&
                     yj.to_vector<float>() == (want * 2.0).to_vector<float>(),
                 "squareplus equals the composed ops, gradient and jit included",
                 "squareplus differs from the composed ops");
} catch (const Error& e) {
  std::cerr << "error: " << e.what() << "\n";
  return 1;
}
