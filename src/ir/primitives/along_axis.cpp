// Primitives along one axis: argmax and argmin (index reductions, no gradient) and cumsum (its
// transpose is cumsum the other way) — shape rules and VJPs.
#include "rules.hpp"

namespace flaxpp::lax {
namespace {

using ir::VjpArgs;
using Axes = std::vector<std::int64_t>;

// `axis` of a one-axis primitive, checked against its operand.
std::int64_t checked_axis(const std::string& prim, const AVal& x, std::int64_t axis) {
  if (axis < 0 || axis >= x.shape.rank())
    rules::fail(prim, detail::str("axis ", axis, " is not an axis of ", x));
  if (x.dtype == DType::bool_)
    rules::fail(prim, detail::str("expected a numeric operand, got ", x));
  return axis;
}

std::vector<AVal> arg_reduce_rule(const std::string& prim, std::span<const AVal> in,
                                  const ir::Params& p) {
  rules::expect_arity(prim, in, 1);
  const AVal& x = in[0];
  const Axes& axes = p.get<Axes>("axes");
  if (axes.size() != 1)
    rules::fail(prim, detail::str("reduces exactly one axis, got ", axes.size()));
  const auto axis = static_cast<std::size_t>(checked_axis(prim, x, axes[0]));
  if (x.shape.dims()[axis] < 1)
    rules::fail(prim,
                detail::str("axis ", axis, " of ", x, " is empty: there is no index to return"));
  if (p.get<DType>("index_dtype") != DType::i32)
    rules::fail(prim, detail::str("index_dtype must be int32, got ",
                                  dtype_name(p.get<DType>("index_dtype"))));
  Axes dims = x.shape.dims();
  dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(axis));
  return {{Shape(dims), DType::i32}};
}

std::vector<Array> no_gradient(const VjpArgs&) {
  return {Array()};
}

Array arg_reduce(const ir::Primitive& prim, const Array& x, std::int64_t axis, DType index_dtype) {
  const Array in[] = {x};
  return ir::bind1(prim, in, {{"axes", Axes{axis}}, {"index_dtype", index_dtype}});
}

}  // namespace

const ir::Primitive argmax_p(
    "argmax",
    [](std::span<const AVal> in, const ir::Params& p) { return arg_reduce_rule("argmax", in, p); },
    no_gradient);

const ir::Primitive argmin_p(
    "argmin",
    [](std::span<const AVal> in, const ir::Params& p) { return arg_reduce_rule("argmin", in, p); },
    no_gradient);

const ir::Primitive cumsum_p(
    "cumsum",
    [](std::span<const AVal> in, const ir::Params& p) {
      rules::expect_arity("cumsum", in, 1);
      checked_axis("cumsum", in[0], p.get<std::int64_t>("axis"));
      return std::vector<AVal>{in[0]};
    },
    [](const VjpArgs& a) {
      return std::vector<Array>{cumsum(a.cotangents[0], a.params.get<std::int64_t>("axis"),
                                       !a.params.get<bool>("reverse"))};
    });

Array argmax(const Array& x, std::int64_t axis, DType index_dtype) {
  return arg_reduce(argmax_p, x, axis, index_dtype);
}

Array argmin(const Array& x, std::int64_t axis, DType index_dtype) {
  return arg_reduce(argmin_p, x, axis, index_dtype);
}

Array cumsum(const Array& x, std::int64_t axis, bool reverse) {
  const Array in[] = {x};
  return ir::bind1(cumsum_p, in, {{"axis", axis}, {"reverse", reverse}});
}

}  // namespace flaxpp::lax
