// Elementwise primitives: those of flaxpp/kernels/elementwise.hpp's lists (binary arithmetic,
// comparisons, unary math), made here from their lines with the VJP rule each has below as
// name_vjp, and integer_pow. The VJPs are JAX's JVP rules transposed, so gradients round alike.
#include <cmath>
#include <numbers>

#include "rules.hpp"

namespace flaxpp::lax {
namespace {

using ir::VjpArgs;

// The dtypes a list line names.
enum class Dtypes { Num, Fp };

std::vector<AVal> unary_rule(const std::string& name, std::span<const AVal> in, Dtypes dtypes) {
  rules::expect_arity(name, in, 1);
  if (dtypes == Dtypes::Fp) rules::expect_floating(name, in[0]);
  if (in[0].dtype == DType::bool_)
    rules::fail(name, detail::str("expected a numeric operand, got ", in[0]));
  return {in[0]};
}

ir::Primitive::ShapeRule binary_shape(const char* name, Dtypes dtypes) {
  return [name, dtypes](std::span<const AVal> in, const ir::Params&) {
    const AVal out = rules::binary(name, in);
    if (dtypes == Dtypes::Fp) rules::expect_floating(name, out);
    return std::vector<AVal>{out};
  };
}
ir::Primitive::ShapeRule compare_shape(const char* name) {
  return [name](std::span<const AVal> in, const ir::Params&) {
    return std::vector<AVal>{{rules::binary(name, in, /*comparison=*/true).shape, DType::bool_}};
  };
}
ir::Primitive::ShapeRule unary_shape(const char* name, Dtypes dtypes) {
  return [name, dtypes](std::span<const AVal> in, const ir::Params&) {
    return unary_rule(name, in, dtypes);
  };
}

Array apply_binary(const ir::Primitive& p, const Array& x, const Array& y) {
  const Array in[] = {x, y};
  return ir::bind1(p, in);
}
Array apply_unary(const ir::Primitive& p, const Array& x, const ir::Params& params = {}) {
  const Array in[] = {x};
  return ir::bind1(p, in, params);
}

#define FLAXPP_DECLARE_VJP(name, ...) std::vector<Array> name##_vjp(const VjpArgs& a);
FLAXPP_ELEMENTWISE_BINARY(FLAXPP_DECLARE_VJP)
FLAXPP_ELEMENTWISE_UNARY(FLAXPP_DECLARE_VJP)
#undef FLAXPP_DECLARE_VJP

}  // namespace

#define FLAXPP_DEFINE_BINARY(name, Functor, dtypes, ...)                                \
  const ir::Primitive name##_p(#name, binary_shape(#name, Dtypes::dtypes), name##_vjp); \
  Array name(const Array& x, const Array& y) {                                          \
    return apply_binary(name##_p, x, y);                                                \
  }
#define FLAXPP_DEFINE_COMPARISON(name, Functor, ...)         \
  const ir::Primitive name##_p(#name, compare_shape(#name)); \
  Array name(const Array& x, const Array& y) {               \
    return apply_binary(name##_p, x, y);                     \
  }
#define FLAXPP_DEFINE_UNARY(name, Functor, dtypes, ...)                                \
  const ir::Primitive name##_p(#name, unary_shape(#name, Dtypes::dtypes), name##_vjp); \
  Array name(const Array& x) {                                                         \
    return apply_unary(name##_p, x);                                                   \
  }
FLAXPP_ELEMENTWISE_BINARY(FLAXPP_DEFINE_BINARY)
FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_DEFINE_COMPARISON)
FLAXPP_ELEMENTWISE_UNARY(FLAXPP_DEFINE_UNARY)
#undef FLAXPP_DEFINE_BINARY
#undef FLAXPP_DEFINE_COMPARISON
#undef FLAXPP_DEFINE_UNARY

namespace {

// Cotangents of a binary op whose partials are ct*dx and ct*dy (invalid = no contribution).
std::vector<Array> binary_cts(const VjpArgs& a, const Array& ct_x, const Array& ct_y) {
  return {rules::unbroadcast(ct_x, a.inputs[0].aval()),
          rules::unbroadcast(ct_y, a.inputs[1].aval())};
}

// JAX's _balanced_eq(x, z, y): 1 where x == z, halved where y == z too (ties split the
// gradient of max/min evenly).
Array balanced_eq(const Array& x, const Array& z, const Array& y) {
  return div(select(eq(x, z), full_like(z, 1.0), full_like(z, 0.0)),
             select(eq(y, z), full_like(z, 2.0), full_like(z, 1.0)));
}

std::vector<Array> minmax_vjp(const VjpArgs& a) {
  const Array& ct = a.cotangents[0];
  const Array& ans = a.outputs[0];
  return binary_cts(a, mul(ct, balanced_eq(a.inputs[0], ans, a.inputs[1])),
                    mul(ct, balanced_eq(a.inputs[1], ans, a.inputs[0])));
}

std::vector<Array> add_vjp(const VjpArgs& a) {
  return binary_cts(a, a.cotangents[0], a.cotangents[0]);
}
std::vector<Array> sub_vjp(const VjpArgs& a) {
  return binary_cts(a, a.cotangents[0], neg(a.cotangents[0]));
}
std::vector<Array> mul_vjp(const VjpArgs& a) {
  const Array& ct = a.cotangents[0];
  return binary_cts(a, mul(ct, a.inputs[1]), mul(a.inputs[0], ct));
}
std::vector<Array> div_vjp(const VjpArgs& a) {
  const Array& ct = a.cotangents[0];
  const Array& x = a.inputs[0];
  const Array& y = a.inputs[1];
  return binary_cts(a, div(ct, y), mul(mul(neg(ct), x), integer_pow(y, -2)));
}
std::vector<Array> max_vjp(const VjpArgs& a) {
  return minmax_vjp(a);
}
std::vector<Array> min_vjp(const VjpArgs& a) {
  return minmax_vjp(a);
}
// JAX's _pow_jvp_lhs and _pow_jvp_rhs, transposed: d/dx = y * x**(y-1) (0 where y == 0),
// d/dy = log(x) * x**y with log(0) replaced by log(1).
std::vector<Array> pow_vjp(const VjpArgs& a) {
  const Array& ct = a.cotangents[0];
  const Array& x = a.inputs[0];
  const Array& y = a.inputs[1];
  const auto replace_zero = [](const Array& v) {
    return select(eq(v, full_like(v, 0.0)), full_like(v, 1.0), v);
  };
  const Array dx = select(eq(y, full_like(y, 0.0)), full_like(y, 0.0),
                          mul(replace_zero(y), pow(x, sub(y, full_like(y, 1.0)))));
  return binary_cts(a, mul(ct, dx), mul(ct, mul(log(replace_zero(x)), a.outputs[0])));
}

std::vector<Array> neg_vjp(const VjpArgs& a) {
  return {neg(a.cotangents[0])};
}
std::vector<Array> abs_vjp(const VjpArgs& a) {
  // JAX's _abs_jvp_rule: select(x >= 0, g, -g) — the gradient at 0 is +g.
  const Array& x = a.inputs[0];
  const Array& g = a.cotangents[0];
  return {select(ge(x, scalar(0.0, x.dtype())), g, neg(g))};
}
std::vector<Array> sign_vjp(const VjpArgs& a) {
  return std::vector<Array>(a.inputs.size());  // zero almost everywhere
}
std::vector<Array> exp_vjp(const VjpArgs& a) {
  return {mul(a.cotangents[0], a.outputs[0])};
}
std::vector<Array> log_vjp(const VjpArgs& a) {
  return {div(a.cotangents[0], a.inputs[0])};
}
std::vector<Array> log1p_vjp(const VjpArgs& a) {
  const Array& x = a.inputs[0];
  return {div(a.cotangents[0], add(x, scalar(1.0, x.dtype())))};
}
std::vector<Array> tanh_vjp(const VjpArgs& a) {
  // JAX: (g + g*ans) * (1 - ans).
  const Array& g = a.cotangents[0];
  const Array& ans = a.outputs[0];
  return {mul(add(g, mul(g, ans)), sub(scalar(1.0, ans.dtype()), ans))};
}
std::vector<Array> logistic_vjp(const VjpArgs& a) {
  // JAX: g * (ans * (1 - ans)).
  const Array& ans = a.outputs[0];
  return {mul(a.cotangents[0], mul(ans, sub(scalar(1.0, ans.dtype()), ans)))};
}
std::vector<Array> sqrt_vjp(const VjpArgs& a) {
  // JAX: g * (0.5 / ans).
  const Array& ans = a.outputs[0];
  return {mul(a.cotangents[0], div(scalar(0.5, ans.dtype()), ans))};
}
std::vector<Array> rsqrt_vjp(const VjpArgs& a) {
  // JAX: g * (-0.5 * (ans / x)).
  const Array& x = a.inputs[0];
  return {mul(a.cotangents[0], mul(scalar(-0.5, x.dtype()), div(a.outputs[0], x)))};
}
std::vector<Array> erf_vjp(const VjpArgs& a) {
  // JAX: (2/sqrt(pi)) * (g * exp(-x^2)).
  const Array& x = a.inputs[0];
  const double c = 2.0 / std::sqrt(std::numbers::pi);
  return {mul(scalar(c, x.dtype()), mul(a.cotangents[0], exp(neg(integer_pow(x, 2)))))};
}
std::vector<Array> cos_vjp(const VjpArgs& a) {
  // JAX: -(g * sin(x)).
  return {neg(mul(a.cotangents[0], sin(a.inputs[0])))};
}
std::vector<Array> sin_vjp(const VjpArgs& a) {
  // JAX: g * cos(x).
  return {mul(a.cotangents[0], cos(a.inputs[0]))};
}

}  // namespace

const ir::Primitive integer_pow_p(
    "integer_pow",
    [](std::span<const AVal> in, const ir::Params& p) {
      if (!in.empty() && is_integer(in[0].dtype) && p.get<std::int64_t>("y") < 0)
        rules::fail("integer_pow", detail::str("integers cannot be raised to negative powers, got ",
                                               in[0], " ** ", p.get<std::int64_t>("y")));
      return unary_rule("integer_pow", in, Dtypes::Num);
    },
    [](const VjpArgs& a) {
      // JAX: g * (y * x^(y-1)); zero for y == 0.
      const std::int64_t y = a.params.get<std::int64_t>("y");
      const Array& x = a.inputs[0];
      if (y == 0) return std::vector<Array>{Array()};
      const Array dx = y == 1
                           ? full_like(x, 1.0)
                           : mul(scalar(static_cast<double>(y), x.dtype()), integer_pow(x, y - 1));
      return std::vector<Array>{mul(a.cotangents[0], dx)};
    });
Array integer_pow(const Array& x, std::int64_t y) {
  return apply_unary(integer_pow_p, x, {{"y", y}});
}

namespace {

// Binary operands that are 0-d for every example stay so: the primitive broadcasts them.
const bool elementwise_batching_registered = [] {
#define FLAXPP_REGISTER_BATCHING(name, Functor, dtypes, ...) \
  ir::register_batching(name##_p, rules::batch_elementwise(2));
  FLAXPP_ELEMENTWISE_BINARY(FLAXPP_REGISTER_BATCHING)
  FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_REGISTER_BATCHING)
  FLAXPP_ELEMENTWISE_UNARY(FLAXPP_REGISTER_BATCHING)
#undef FLAXPP_REGISTER_BATCHING
  ir::register_batching(integer_pow_p, rules::batch_elementwise(0));
  return true;
}();

}  // namespace

}  // namespace flaxpp::lax
