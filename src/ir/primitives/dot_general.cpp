// dot_general: the general tensor contraction (batch and contracting dimensions anywhere),
// with JAX's transpose rules as its VJP (jax/_src/lax/lax.py _dot_general_transpose_lhs/rhs).
#include <algorithm>
#include <numeric>

#include "rules.hpp"

namespace flaxpp::lax {
namespace {

using Axes = std::vector<std::int64_t>;
using ir::DotDimensionNumbers;

bool contains(const Axes& v, std::int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Axes of [0, rank) in neither list, in order.
Axes remaining(std::int64_t rank, const Axes& a, const Axes& b) {
  Axes out;
  for (std::int64_t i = 0; i < rank; ++i)
    if (!contains(a, i) && !contains(b, i)) out.push_back(i);
  return out;
}

Axes range(std::int64_t start, std::size_t n) {
  Axes out(n);
  std::iota(out.begin(), out.end(), start);
  return out;
}

void check_axes(const char* side, const Axes& axes, const AVal& a) {
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= a.shape.rank())
      rules::fail("dot_general", detail::str(side, " axis ", axes[i], " is out of range for ", a));
    for (std::size_t j = 0; j < i; ++j)
      if (axes[j] == axes[i])
        rules::fail("dot_general", detail::str(side, " axis ", axes[i], " is used twice"));
  }
}

std::vector<AVal> dot_general_rule(std::span<const AVal> in, const ir::Params& p) {
  rules::expect_arity("dot_general", in, 2);
  const auto& d = p.get<DotDimensionNumbers>("dimension_numbers");
  const AVal& lhs = in[0];
  const AVal& rhs = in[1];
  if (lhs.dtype != rhs.dtype)
    rules::fail("dot_general",
                detail::str("operands must have the same dtype, got ", rules::avals_str(in)));
  if (!is_floating(lhs.dtype))
    rules::fail("dot_general",
                detail::str("operands must be floating point, got ", rules::avals_str(in)));
  if (d.lhs_contracting.size() != d.rhs_contracting.size() ||
      d.lhs_batch.size() != d.rhs_batch.size())
    rules::fail("dot_general", "lhs and rhs need as many contracting (and batch) dimensions each");
  Axes lhs_all = d.lhs_contracting, rhs_all = d.rhs_contracting;
  lhs_all.insert(lhs_all.end(), d.lhs_batch.begin(), d.lhs_batch.end());
  rhs_all.insert(rhs_all.end(), d.rhs_batch.begin(), d.rhs_batch.end());
  check_axes("lhs", lhs_all, lhs);
  check_axes("rhs", rhs_all, rhs);
  auto dim = [](const AVal& a, std::int64_t axis) {
    return a.shape.dims()[static_cast<std::size_t>(axis)];
  };
  for (std::size_t i = 0; i < d.lhs_contracting.size(); ++i)
    if (dim(lhs, d.lhs_contracting[i]) != dim(rhs, d.rhs_contracting[i]))
      rules::fail("dot_general", detail::str("contracting dimensions differ in size: lhs ", lhs,
                                             " axis ", d.lhs_contracting[i], " vs rhs ", rhs,
                                             " axis ", d.rhs_contracting[i]));
  for (std::size_t i = 0; i < d.lhs_batch.size(); ++i)
    if (dim(lhs, d.lhs_batch[i]) != dim(rhs, d.rhs_batch[i]))
      rules::fail("dot_general",
                  detail::str("batch dimensions differ in size: lhs ", lhs, " axis ",
                              d.lhs_batch[i], " vs rhs ", rhs, " axis ", d.rhs_batch[i]));
  Axes out;
  for (std::int64_t a : d.lhs_batch)
    out.push_back(dim(lhs, a));
  for (std::int64_t a : remaining(lhs.shape.rank(), d.lhs_contracting, d.lhs_batch))
    out.push_back(dim(lhs, a));
  for (std::int64_t a : remaining(rhs.shape.rank(), d.rhs_contracting, d.rhs_batch))
    out.push_back(dim(rhs, a));
  DType dtype = lhs.dtype;
  if (p.has("preferred_element_type")) dtype = p.get<DType>("preferred_element_type");
  return {{Shape(out), dtype}};
}

// JAX's _dot_general_transpose_lhs: the cotangent of x in dot_general(x, y).
Array transpose_lhs(const Array& g, const AVal& x, const Array& y, MatmulPrecision precision,
                    const DotDimensionNumbers& d,
                    bool swap_ans, std::optional<DType> preferred) {
  const Axes& x_contract = d.lhs_contracting;
  const Axes& y_contract = d.rhs_contracting;
  const Axes& x_batch = d.lhs_batch;
  const Axes& y_batch = d.rhs_batch;
  const Axes x_kept = remaining(x.shape.rank(), x_contract, x_batch);
  const Axes y_kept = remaining(y.rank(), y_contract, y_batch);
  const Axes ans_batch = range(0, x_batch.size());
  const Axes ans_y =
      swap_ans ? range(static_cast<std::int64_t>(x_batch.size()), y_kept.size())
               : range(static_cast<std::int64_t>(x_batch.size() + x_kept.size()), y_kept.size());
  const DotDimensionNumbers dims{ans_y, y_kept, ans_batch, y_batch};
  // x_contract sorted by the order of y_contract.
  std::vector<std::size_t> order(y_contract.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return y_contract[a] < y_contract[b]; });
  Axes pre = x_batch;
  pre.insert(pre.end(), x_kept.begin(), x_kept.end());
  for (std::size_t i : order)
    pre.push_back(x_contract[i]);
  // out_axes = argsort(pre).
  Axes out_axes(pre.size());
  std::iota(out_axes.begin(), out_axes.end(), 0);
  std::stable_sort(out_axes.begin(), out_axes.end(), [&](std::int64_t a, std::int64_t b) {
    return pre[static_cast<std::size_t>(a)] < pre[static_cast<std::size_t>(b)];
  });
  // As JAX: the transposed dot accumulates like the forward one, then returns x's dtype.
  // dot(g, y) has axes [batch, g's free, y's free]; with the operands swapped the same sums
  // come out as [batch, y's free, g's free]. When out_axes is exactly that swap — a weight
  // cotangent x^T g wanted as (in, out) — the swapped product replaces product + transpose,
  // as XLA's layout assignment would fold the transpose into the matrix product.
  const std::size_t nb = x_batch.size(), ny = y_contract.size();
  const std::size_t ng = static_cast<std::size_t>(g.rank()) - nb - ans_y.size();
  Axes block_swap = range(0, nb);
  const Axes y_free = range(static_cast<std::int64_t>(nb + ng), ny);
  const Axes g_free = range(static_cast<std::int64_t>(nb), ng);
  block_swap.insert(block_swap.end(), y_free.begin(), y_free.end());
  block_swap.insert(block_swap.end(), g_free.begin(), g_free.end());
  if (ng > 0 && ny > 0 && out_axes == block_swap)
    return convert_element_type(
        dot_general(y, g, DotDimensionNumbers{y_kept, ans_y, y_batch, ans_batch}, preferred,
                    precision),
        x.dtype);
  return convert_element_type(transpose(dot_general(g, y, dims, preferred, precision), out_axes),
                              x.dtype);
}

}  // namespace

const ir::Primitive dot_general_p("dot_general", dot_general_rule, [](const ir::VjpArgs& a) {
  const auto& d = a.params.get<DotDimensionNumbers>("dimension_numbers");
  const Array& g = a.cotangents[0];
  const Array& x = a.inputs[0];
  const Array& y = a.inputs[1];
  const DotDimensionNumbers swapped{d.rhs_contracting, d.lhs_contracting, d.rhs_batch, d.lhs_batch};
  std::optional<DType> preferred;
  if (a.params.has("preferred_element_type"))
    preferred = a.params.get<DType>("preferred_element_type");
  // With a wider preferred_element_type the cotangent is wider than the operands: the
  // transposed dots run in its dtype and the results return to the operands' dtypes.
  const Array yg = convert_element_type(y, g.dtype()), xg = convert_element_type(x, g.dtype());
  // The backward products take the forward product's precision, as JAX's transpose rules do.
  const MatmulPrecision precision = dot_precision(a.params);
  return std::vector<Array>{transpose_lhs(g, x.aval(), yg, precision, d, false, preferred),
                            transpose_lhs(g, y.aval(), xg, precision, swapped, true, preferred)};
});

namespace {

// dot_general_bias: the product with its bias added, as fuse_dot_bias makes it from a
// dot_general and the add of a bias broadcast over the product's leading axes.
std::vector<AVal> dot_general_bias_rule(std::span<const AVal> in, const ir::Params& p) {
  const char* const name = "dot_general_bias";
  rules::expect_arity(name, in, 3);
  std::vector<AVal> out = dot_general_rule(in.first(2), p);
  const auto& d = p.get<DotDimensionNumbers>("dimension_numbers");
  if (!d.lhs_batch.empty())
    rules::fail(name, "takes a product without batch dimensions (one matrix product)");
  // A 16-bit product rounds before its bias is added; fused, it would round once.
  if ((out[0].dtype != DType::f32 && out[0].dtype != DType::f64) || in[0].dtype != out[0].dtype)
    rules::fail(name, detail::str("takes float32 or float64 operands and product, got ",
                                  rules::avals_str(in.first(2)), " -> ", out[0]));
  const AVal& bias = in[2];
  const std::int64_t free =
      in[1].shape.rank() - static_cast<std::int64_t>(d.rhs_contracting.size());
  const auto& dims = out[0].shape.dims();
  const Shape expected(std::vector<std::int64_t>(dims.end() - free, dims.end()));
  if (bias.dtype != out[0].dtype || bias.shape != expected)
    rules::fail(name, detail::str("the bias must be ", AVal{expected, out[0].dtype},
                                  " (the product's rhs free axes), got ", bias));
  return out;
}

}  // namespace

const ir::Primitive dot_general_bias_p("dot_general_bias", dot_general_bias_rule);

namespace {

// Both operands batched: the batch axis is one more batch dimension, the result's first. One
// batched: a free axis of it, moved to the front of the result (JAX's _dot_general_batch_rule).
ir::BatchedResults dot_general_batched(const ir::BatchArgs& a) {
  const auto& d = a.params.get<DotDimensionNumbers>("dimension_numbers");
  const bool lhs = a.batched[0], rhs = a.batched[1];
  DotDimensionNumbers b{lhs ? rules::past_batch_axis(d.lhs_contracting) : d.lhs_contracting,
                        rhs ? rules::past_batch_axis(d.rhs_contracting) : d.rhs_contracting,
                        lhs ? rules::past_batch_axis(d.lhs_batch) : d.lhs_batch,
                        rhs ? rules::past_batch_axis(d.rhs_batch) : d.rhs_batch};
  // Where the batch axis lands: the result's axes are the batch dims, lhs free, rhs free.
  std::int64_t at = 0;
  if (lhs && rhs) {
    b.lhs_batch = rules::prefixed(0, b.lhs_batch);
    b.rhs_batch = rules::prefixed(0, b.rhs_batch);
  } else if (lhs) {
    at = static_cast<std::int64_t>(d.lhs_batch.size());
  } else {
    at = a.inputs[0].rank() - static_cast<std::int64_t>(d.lhs_contracting.size());
  }
  const Array out =
      ir::bind1(a.prim, a.inputs, rules::with_param(a.params, "dimension_numbers", std::move(b)));
  return {{ir::move_axis(out, at, 0)}, {true}};
}

// 2·M·N·K: the result's elements times the contracted length, a multiply and an add each.
std::int64_t dot_flops(std::span<const AVal> in, std::span<const AVal> out, const ir::Params& p) {
  const auto& d = p.get<DotDimensionNumbers>("dimension_numbers");
  std::int64_t contracted = 1;
  for (const std::int64_t axis : d.lhs_contracting)
    contracted *= in[0].shape[axis];
  return 2 * out[0].shape.size() * contracted;
}

const bool dot_general_rules_registered = [] {
  ir::register_batching(dot_general_p, dot_general_batched);
  ir::register_flops(dot_general_p, dot_flops);
  ir::register_flops(dot_general_bias_p, dot_flops);
  return true;
}();

}  // namespace

MatmulPrecision dot_precision(const ir::Params& params) {
  return params.has("precision") ? matmul_precision_from_name(params.get<std::string>("precision"))
                                 : MatmulPrecision::float32;
}

Array dot_general(const Array& lhs, const Array& rhs, const DotDimensionNumbers& dimension_numbers,
                  std::optional<DType> preferred_element_type,
                  std::optional<MatmulPrecision> precision) {
  ir::Params params{{"dimension_numbers", dimension_numbers}};
  if (preferred_element_type) params.set("preferred_element_type", *preferred_element_type);
  // Fixed here, at bind (trace) time, as jax.lax.dot_general's precision=: nothing reads the
  // default while a graph runs. float32, the default, is no parameter at all.
  if (const MatmulPrecision p = precision.value_or(default_matmul_precision());
      p != MatmulPrecision::float32)
    params.set("precision", std::string(matmul_precision_name(p)));
  const Array in[] = {lhs, rhs};
  return ir::bind1(dot_general_p, in, params);
}

}  // namespace flaxpp::lax
