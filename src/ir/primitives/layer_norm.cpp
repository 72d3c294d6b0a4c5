// layer_norm and its cotangent primitives: LayerNorm over the last axis as one primitive, so
// that a backend runs it as one kernel (cuDNN's on CUDA) where JAX composes it from
// reductions and elementwise ops that XLA then fuses. The value is Flax's formula (nn.LayerNorm,
// use_fast_variance): mean = mean(x), var = max(0, mean(x^2) - mean^2),
// y = (x - mean) * (rsqrt(var + epsilon) * scale) + bias, over the last axis.
#include "rules.hpp"

namespace flaxpp::lax {
namespace {

using ir::VjpArgs;
using Axes = std::vector<std::int64_t>;

// x (..., F) floating; every other operand is (F,) or x-shaped as `shapes` says, x's dtype.
void check_operands(const std::string& prim, std::span<const AVal> in,
                    std::initializer_list<bool> x_shaped) {
  rules::expect_arity(prim, in, x_shaped.size() + 1);
  const AVal& x = in[0];
  rules::expect_floating(prim, x);
  if (x.shape.rank() == 0)
    rules::fail(prim, detail::str("the operand needs at least one axis, got ", x));
  const Shape features{x.shape.dims().back()};
  std::size_t i = 1;
  for (const bool full : x_shaped) {
    const AVal want{full ? x.shape : features, x.dtype};
    if (in[i] != want)
      rules::fail(prim, detail::str("operand ", i, " must be ", want, " for ", x, "; got ",
                                    rules::avals_str(in)));
    ++i;
  }
}

Axes leading_axes(std::int64_t rank) {
  Axes axes;
  for (std::int64_t a = 0; a + 1 < rank; ++a)
    axes.push_back(a);
  return axes;
}

}  // namespace

// dx of layer_norm(x, scale, bias) for the cotangent dy: with r = rsqrt(var + epsilon),
// xhat = (x - mean) r and g = dy * scale, dx = r (g - mean(g) - xhat mean(g xhat)).
// Not differentiable itself (flaxpp's LayerNorm is differentiable once).
const ir::Primitive layer_norm_dx_p("layer_norm_dx",
                                    [](std::span<const AVal> in, const ir::Params&) {
                                      check_operands("layer_norm_dx", in, {false, true});
                                      return std::vector<AVal>{in[0]};
                                    });

// dscale: the sum over the leading axes of dy * xhat.
const ir::Primitive layer_norm_dscale_p("layer_norm_dscale", [](std::span<const AVal> in,
                                                                const ir::Params&) {
  check_operands("layer_norm_dscale", in, {true});
  return std::vector<AVal>{{Shape{in[0].shape.dims().back()}, in[0].dtype}};
});

const ir::Primitive layer_norm_p(
    "layer_norm",
    [](std::span<const AVal> in, const ir::Params&) {
      check_operands("layer_norm", in, {false, false});
      return std::vector<AVal>{in[0]};
    },
    [](const VjpArgs& a) {
      const Array& x = a.inputs[0];
      const Array& g = a.cotangents[0];
      const double epsilon = a.params.get<double>("epsilon");
      return std::vector<Array>{layer_norm_dx(x, a.inputs[1], g, epsilon),
                                layer_norm_dscale(x, g, epsilon),
                                reduce_sum(g, leading_axes(x.rank()))};
    });

Array layer_norm(const Array& x, const Array& scale, const Array& bias, double epsilon) {
  const Array in[] = {x, scale, bias};
  return ir::bind1(layer_norm_p, in, {{"epsilon", epsilon}});
}

Array layer_norm_dx(const Array& x, const Array& scale, const Array& dy, double epsilon) {
  const Array in[] = {x, scale, dy};
  return ir::bind1(layer_norm_dx_p, in, {{"epsilon", epsilon}});
}

Array layer_norm_dscale(const Array& x, const Array& dy, double epsilon) {
  const Array in[] = {x, dy};
  return ir::bind1(layer_norm_dscale_p, in, {{"epsilon", epsilon}});
}

}  // namespace flaxpp::lax
