// Shape-rule helpers for the primitive definitions.
#include "rules.hpp"

#include <numeric>

namespace flaxpp::lax::rules {

void fail(const std::string& prim, const std::string& message) {
  throw ValueError(prim + ": " + message);
}

std::string avals_str(std::span<const AVal> in) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i)
    out += detail::str(i ? ", " : "", in[i]);
  return out;
}

void expect_arity(const std::string& prim, std::span<const AVal> in, std::size_t n) {
  if (in.size() != n) fail(prim, detail::str("expected ", n, " operands, got ", in.size()));
}

AVal binary(const std::string& prim, std::span<const AVal> in, bool comparison) {
  expect_arity(prim, in, 2);
  if (in[0].dtype == DType::bool_ && !comparison)
    fail(prim, detail::str("arithmetic on bool operands is not defined, got ", avals_str(in),
                           "; convert them to a numeric dtype first"));
  if (in[0].dtype != in[1].dtype)
    fail(prim,
         detail::str("operands must have the same dtype, got ", avals_str(in),
                     "; convert one with convert_element_type (or use the promoting flaxpp ops)"));
  if (in[0].shape == in[1].shape || in[1].shape.rank() == 0) return in[0];
  if (in[0].shape.rank() == 0) return in[1];
  fail(prim,
       detail::str("operands must have equal shapes (or one 0-d), got ", avals_str(in),
                   "; broadcast first with broadcast_in_dim (or use the broadcasting flaxpp ops)"));
}

void expect_floating(const std::string& prim, const AVal& a) {
  if (!is_floating(a.dtype)) fail(prim, detail::str("expected a floating-point operand, got ", a));
}

Array unbroadcast(const Array& ct, const AVal& operand) {
  if (!ct.valid() || ct.shape() == operand.shape) return ct;
  FLAXPP_ASSERT(operand.shape.rank() == 0, "unbroadcast to ", operand, " from ", ct.aval());
  std::vector<std::int64_t> axes(static_cast<std::size_t>(ct.rank()));
  std::iota(axes.begin(), axes.end(), 0);
  return reduce_sum(ct, axes);
}

}  // namespace flaxpp::lax::rules
