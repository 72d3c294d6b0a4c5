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

namespace {

// Batching. The rows of every example are rows of the batch; a scale or bias that differs
// between examples is applied after normalising with ones and zeros (which rounds once more
// than the fused formula, scale multiplying (x - mean) r instead of r).

// A (F,) array of `value` for the features of x.
Array features_full(const Array& x, double value) {
  return broadcast_in_dim(scalar(value, x.dtype()), Shape{x.shape().dims().back()}, {});
}

// (size, F) as x's shape (size, ..., F).
Array per_example_features(const Array& v, const Array& x) {
  return broadcast_in_dim(v, x.shape(), {0, x.rank() - 1});
}

ir::BatchedResults layer_norm_batched(const ir::BatchArgs& a) {
  const double epsilon = a.params.get<double>("epsilon");
  const Array x = ir::with_batch_axis(a.inputs[0], a.batched[0], a.size);
  if (!a.batched[1] && !a.batched[2])
    return {{layer_norm(x, a.inputs[1], a.inputs[2], epsilon)}, {true}};
  const Array xhat = layer_norm(x, features_full(x, 1), features_full(x, 0), epsilon);
  const auto full = [&](std::size_t i) {
    return a.batched[i] ? per_example_features(a.inputs[i], x)
                        : broadcast_in_dim(a.inputs[i], x.shape(), {x.rank() - 1});
  };
  return {{add(mul(xhat, full(1)), full(2))}, {true}};
}

ir::BatchedResults layer_norm_dx_batched(const ir::BatchArgs& a) {
  const double epsilon = a.params.get<double>("epsilon");
  const Array x = ir::with_batch_axis(a.inputs[0], a.batched[0], a.size);
  const Array dy = ir::with_batch_axis(a.inputs[2], a.batched[2], a.size);
  if (!a.batched[1]) return {{layer_norm_dx(x, a.inputs[1], dy, epsilon)}, {true}};
  // dx reads scale only through g = dy * scale.
  return {{layer_norm_dx(x, features_full(x, 1), mul(dy, per_example_features(a.inputs[1], x)),
                         epsilon)},
          {true}};
}

ir::BatchedResults layer_norm_dscale_batched(const ir::BatchArgs& a) {
  const double epsilon = a.params.get<double>("epsilon");
  const Array x = ir::with_batch_axis(a.inputs[0], a.batched[0], a.size);
  const Array dy = ir::with_batch_axis(a.inputs[1], a.batched[1], a.size);
  const Array xhat = layer_norm(x, features_full(x, 1), features_full(x, 0), epsilon);
  Axes rows = leading_axes(x.rank());
  rows.erase(rows.begin());
  const Array product = mul(dy, xhat);
  return {{rows.empty() ? product : reduce_sum(product, rows)}, {true}};
}

const bool layer_norm_batching_registered = [] {
  ir::register_batching(layer_norm_p, layer_norm_batched);
  ir::register_batching(layer_norm_dx_p, layer_norm_dx_batched);
  ir::register_batching(layer_norm_dscale_p, layer_norm_dscale_batched);
  return true;
}();

}  // namespace

}  // namespace flaxpp::lax
