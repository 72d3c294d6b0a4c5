// Elementwise primitives: binary arithmetic, comparisons, unary math, integer_pow. Each with
// its shape rule and its VJP (written as JAX's JVP rules transposed, so gradients round alike).
#include <cmath>
#include <numbers>

#include "rules.hpp"

namespace flaxpp::lax {
namespace {

using ir::VjpArgs;

std::vector<AVal> binary_rule(const std::string& name, std::span<const AVal> in) {
  return {rules::binary(name, in)};
}

std::vector<AVal> compare_rule(const std::string& name, std::span<const AVal> in) {
  return {{rules::binary(name, in).shape, DType::bool_}};
}

std::vector<AVal> unary_rule(const std::string& name, std::span<const AVal> in,
                             bool floating_only) {
  rules::expect_arity(name, in, 1);
  if (floating_only) rules::expect_floating(name, in[0]);
  if (in[0].dtype == DType::bool_)
    rules::fail(name, detail::str("expected a numeric operand, got ", in[0]));
  return {in[0]};
}

ir::Primitive::ShapeRule binary_shape(const char* name) {
  return [name](std::span<const AVal> in, const ir::Params&) { return binary_rule(name, in); };
}
ir::Primitive::ShapeRule compare_shape(const char* name) {
  return [name](std::span<const AVal> in, const ir::Params&) { return compare_rule(name, in); };
}
ir::Primitive::ShapeRule unary_shape(const char* name, bool floating_only = true) {
  return [name, floating_only](std::span<const AVal> in, const ir::Params&) {
    return unary_rule(name, in, floating_only);
  };
}

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

}  // namespace

const ir::Primitive add_p("add", binary_shape("add"), [](const VjpArgs& a) {
  return binary_cts(a, a.cotangents[0], a.cotangents[0]);
});
const ir::Primitive sub_p("sub", binary_shape("sub"), [](const VjpArgs& a) {
  return binary_cts(a, a.cotangents[0], neg(a.cotangents[0]));
});
const ir::Primitive mul_p("mul", binary_shape("mul"), [](const VjpArgs& a) {
  const Array& ct = a.cotangents[0];
  return binary_cts(a, mul(ct, a.inputs[1]), mul(a.inputs[0], ct));
});
const ir::Primitive div_p("div", binary_shape("div"), [](const VjpArgs& a) {
  const Array& ct = a.cotangents[0];
  const Array& x = a.inputs[0];
  const Array& y = a.inputs[1];
  return binary_cts(a, div(ct, y), mul(mul(neg(ct), x), integer_pow(y, -2)));
});
const ir::Primitive max_p("max", binary_shape("max"), minmax_vjp);
const ir::Primitive min_p("min", binary_shape("min"), minmax_vjp);

const ir::Primitive eq_p("eq", compare_shape("eq"));
const ir::Primitive ne_p("ne", compare_shape("ne"));
const ir::Primitive lt_p("lt", compare_shape("lt"));
const ir::Primitive le_p("le", compare_shape("le"));
const ir::Primitive gt_p("gt", compare_shape("gt"));
const ir::Primitive ge_p("ge", compare_shape("ge"));

const ir::Primitive neg_p("neg", unary_shape("neg", false), [](const VjpArgs& a) {
  return std::vector<Array>{neg(a.cotangents[0])};
});
const ir::Primitive exp_p("exp", unary_shape("exp"), [](const VjpArgs& a) {
  return std::vector<Array>{mul(a.cotangents[0], a.outputs[0])};
});
const ir::Primitive log_p("log", unary_shape("log"), [](const VjpArgs& a) {
  return std::vector<Array>{div(a.cotangents[0], a.inputs[0])};
});
const ir::Primitive log1p_p("log1p", unary_shape("log1p"), [](const VjpArgs& a) {
  const Array& x = a.inputs[0];
  return std::vector<Array>{div(a.cotangents[0], add(x, scalar(1.0, x.dtype())))};
});
const ir::Primitive tanh_p("tanh", unary_shape("tanh"), [](const VjpArgs& a) {
  // JAX: (g + g*ans) * (1 - ans).
  const Array& g = a.cotangents[0];
  const Array& ans = a.outputs[0];
  return std::vector<Array>{mul(add(g, mul(g, ans)), sub(scalar(1.0, ans.dtype()), ans))};
});
const ir::Primitive logistic_p("logistic", unary_shape("logistic"), [](const VjpArgs& a) {
  // JAX: g * (ans * (1 - ans)).
  const Array& ans = a.outputs[0];
  return std::vector<Array>{mul(a.cotangents[0], mul(ans, sub(scalar(1.0, ans.dtype()), ans)))};
});
const ir::Primitive sqrt_p("sqrt", unary_shape("sqrt"), [](const VjpArgs& a) {
  // JAX: g * (0.5 / ans).
  const Array& ans = a.outputs[0];
  return std::vector<Array>{mul(a.cotangents[0], div(scalar(0.5, ans.dtype()), ans))};
});
const ir::Primitive rsqrt_p("rsqrt", unary_shape("rsqrt"), [](const VjpArgs& a) {
  // JAX: g * (-0.5 * (ans / x)).
  const Array& x = a.inputs[0];
  return std::vector<Array>{
      mul(a.cotangents[0], mul(scalar(-0.5, x.dtype()), div(a.outputs[0], x)))};
});
const ir::Primitive erf_p("erf", unary_shape("erf"), [](const VjpArgs& a) {
  // JAX: (2/sqrt(pi)) * (g * exp(-x^2)).
  const Array& x = a.inputs[0];
  const double c = 2.0 / std::sqrt(std::numbers::pi);
  return std::vector<Array>{
      mul(scalar(c, x.dtype()), mul(a.cotangents[0], exp(neg(integer_pow(x, 2)))))};
});
const ir::Primitive abs_p("abs", unary_shape("abs", false), [](const VjpArgs& a) {
  // JAX's _abs_jvp_rule: select(x >= 0, g, -g) — the gradient at 0 is +g.
  const Array& x = a.inputs[0];
  const Array& g = a.cotangents[0];
  return std::vector<Array>{select(ge(x, scalar(0.0, x.dtype())), g, neg(g))};
});
const ir::Primitive sign_p("sign", unary_shape("sign", false), [](const VjpArgs& a) {
  return std::vector<Array>(a.inputs.size());  // zero almost everywhere
});

const ir::Primitive integer_pow_p(
    "integer_pow",
    [](std::span<const AVal> in, const ir::Params& p) {
      if (!in.empty() && is_integer(in[0].dtype) && p.get<std::int64_t>("y") < 0)
        rules::fail("integer_pow", detail::str("integers cannot be raised to negative powers, got ",
                                               in[0], " ** ", p.get<std::int64_t>("y")));
      return unary_rule("integer_pow", in, false);
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

// JAX's _pow_jvp_lhs and _pow_jvp_rhs, transposed: d/dx = y * x**(y-1) (0 where y == 0),
// d/dy = log(x) * x**y with log(0) replaced by log(1).
const ir::Primitive pow_p(
    "pow",
    [](std::span<const AVal> in, const ir::Params&) {
      const AVal out = rules::binary("pow", in);
      rules::expect_floating("pow", out);
      return std::vector<AVal>{out};
    },
    [](const VjpArgs& a) {
      const Array& ct = a.cotangents[0];
      const Array& x = a.inputs[0];
      const Array& y = a.inputs[1];
      const auto replace_zero = [](const Array& v) {
        return select(eq(v, full_like(v, 0.0)), full_like(v, 1.0), v);
      };
      const Array dx = select(eq(y, full_like(y, 0.0)), full_like(y, 0.0),
                              mul(replace_zero(y), pow(x, sub(y, full_like(y, 1.0)))));
      return binary_cts(a, mul(ct, dx), mul(ct, mul(log(replace_zero(x)), a.outputs[0])));
    });
const ir::Primitive cos_p("cos", unary_shape("cos"), [](const VjpArgs& a) {
  // JAX: -(g * sin(x)).
  return std::vector<Array>{neg(mul(a.cotangents[0], sin(a.inputs[0])))};
});
const ir::Primitive sin_p("sin", unary_shape("sin"), [](const VjpArgs& a) {
  // JAX: g * cos(x).
  return std::vector<Array>{mul(a.cotangents[0], cos(a.inputs[0]))};
});

namespace {
Array apply_binary(const ir::Primitive& p, const Array& x, const Array& y) {
  const Array in[] = {x, y};
  return ir::bind1(p, in);
}
Array apply_unary(const ir::Primitive& p, const Array& x, const ir::Params& params = {}) {
  const Array in[] = {x};
  return ir::bind1(p, in, params);
}
}  // namespace

Array add(const Array& x, const Array& y) {
  return apply_binary(add_p, x, y);
}
Array sub(const Array& x, const Array& y) {
  return apply_binary(sub_p, x, y);
}
Array mul(const Array& x, const Array& y) {
  return apply_binary(mul_p, x, y);
}
Array div(const Array& x, const Array& y) {
  return apply_binary(div_p, x, y);
}
Array max(const Array& x, const Array& y) {
  return apply_binary(max_p, x, y);
}
Array min(const Array& x, const Array& y) {
  return apply_binary(min_p, x, y);
}
Array eq(const Array& x, const Array& y) {
  return apply_binary(eq_p, x, y);
}
Array ne(const Array& x, const Array& y) {
  return apply_binary(ne_p, x, y);
}
Array lt(const Array& x, const Array& y) {
  return apply_binary(lt_p, x, y);
}
Array le(const Array& x, const Array& y) {
  return apply_binary(le_p, x, y);
}
Array gt(const Array& x, const Array& y) {
  return apply_binary(gt_p, x, y);
}
Array ge(const Array& x, const Array& y) {
  return apply_binary(ge_p, x, y);
}
Array neg(const Array& x) {
  return apply_unary(neg_p, x);
}
Array exp(const Array& x) {
  return apply_unary(exp_p, x);
}
Array log(const Array& x) {
  return apply_unary(log_p, x);
}
Array log1p(const Array& x) {
  return apply_unary(log1p_p, x);
}
Array tanh(const Array& x) {
  return apply_unary(tanh_p, x);
}
Array logistic(const Array& x) {
  return apply_unary(logistic_p, x);
}
Array sqrt(const Array& x) {
  return apply_unary(sqrt_p, x);
}
Array rsqrt(const Array& x) {
  return apply_unary(rsqrt_p, x);
}
Array erf(const Array& x) {
  return apply_unary(erf_p, x);
}
Array abs(const Array& x) {
  return apply_unary(abs_p, x);
}
Array sign(const Array& x) {
  return apply_unary(sign_p, x);
}
Array integer_pow(const Array& x, std::int64_t y) {
  return apply_unary(integer_pow_p, x, {{"y", y}});
}
Array pow(const Array& x, const Array& y) {
  return apply_binary(pow_p, x, y);
}
Array cos(const Array& x) {
  return apply_unary(cos_p, x);
}
Array sin(const Array& x) {
  return apply_unary(sin_p, x);
}

}  // namespace flaxpp::lax
