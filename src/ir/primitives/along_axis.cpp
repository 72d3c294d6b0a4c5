// Primitives along one axis: argmax and argmin (index reductions, no gradient), cumsum (its
// transpose is cumsum the other way), argsort and permute_along_axis (whose transpose is the
// inverse permutation, argsort of the permutation) — shape rules and VJPs; sort and top_k built
// from them.
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

const ir::Primitive argsort_p(
    "argsort",
    [](std::span<const AVal> in, const ir::Params& p) {
      rules::expect_arity("argsort", in, 1);
      checked_axis("argsort", in[0], p.get<std::int64_t>("dimension"));
      return std::vector<AVal>{{in[0].shape, DType::i32}};
    },
    no_gradient);

const ir::Primitive permute_along_axis_p(
    "permute_along_axis",
    [](std::span<const AVal> in, const ir::Params& p) {
      rules::expect_arity("permute_along_axis", in, 2);
      const std::int64_t axis = p.get<std::int64_t>("axis");
      if (axis < 0 || axis >= in[0].shape.rank())
        rules::fail("permute_along_axis", detail::str("axis ", axis, " is not an axis of ", in[0]));
      if (in[1] != AVal{in[0].shape, DType::i32})
        rules::fail("permute_along_axis",
                    detail::str("the permutation must be int32 of the operand's shape (", in[0],
                                "), got ", in[1]));
      return std::vector<AVal>{in[0]};
    },
    [](const VjpArgs& a) {
      const std::int64_t axis = a.params.get<std::int64_t>("axis");
      const Array inverse = argsort(a.inputs[1], axis);
      return std::vector<Array>{permute_along_axis(a.cotangents[0], inverse, axis), Array()};
    });

namespace {

// The batch axis is one more axis along which the lines lie side by side.
const bool along_axis_batching_registered = [] {
  ir::register_batching(argmax_p, rules::batch_along_axes({"axes"}));
  ir::register_batching(argmin_p, rules::batch_along_axes({"axes"}));
  ir::register_batching(cumsum_p, rules::batch_along_axes({"axis"}));
  ir::register_batching(argsort_p, rules::batch_along_axes({"dimension"}));
  ir::register_batching(permute_along_axis_p, rules::batch_along_axes({"axis"}));
  return true;
}();

}  // namespace

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

Array argsort(const Array& x, std::int64_t dimension, bool descending, bool signed_zeros) {
  const Array in[] = {x};
  return ir::bind1(
      argsort_p, in,
      {{"dimension", dimension}, {"descending", descending}, {"signed_zeros", signed_zeros}});
}

Array permute_along_axis(const Array& x, const Array& permutation, std::int64_t axis) {
  const Array in[] = {x, permutation};
  return ir::bind1(permute_along_axis_p, in, {{"axis", axis}});
}

Array sort(const Array& x, std::int64_t dimension) {
  return permute_along_axis(x, argsort(x, dimension), dimension);
}

std::pair<Array, Array> top_k(const Array& x, std::int64_t k) {
  if (x.rank() == 0) throw ValueError(detail::str("top_k: needs an axis, got ", x.aval()));
  const std::int64_t axis = x.rank() - 1, n = x.shape()[axis];
  if (k < 0 || k > n)
    throw ValueError(detail::str("top_k: k = ", k, " must lie in [0, ", n,
                                 "], the size of the last axis of ", x.aval()));
  const Array order = argsort(x, axis, /*descending=*/true, /*signed_zeros=*/true);
  std::vector<std::int64_t> start(static_cast<std::size_t>(x.rank()), 0), limit = x.shape().dims();
  limit.back() = k;
  return {slice(permute_along_axis(x, order, axis), start, limit), slice(order, start, limit)};
}

}  // namespace flaxpp::lax
