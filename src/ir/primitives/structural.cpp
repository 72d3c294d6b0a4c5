// Structural primitives: broadcast_in_dim, reshape, transpose, reductions, select_n,
// convert_element_type, stop_gradient and name — shape rules and VJPs.
#include <algorithm>
#include <numeric>

#include "rules.hpp"

namespace flaxpp::lax {
namespace {

using ir::VjpArgs;
using Axes = std::vector<std::int64_t>;

std::string axes_str(const Axes& v) {
  std::string out = "(";
  for (std::size_t i = 0; i < v.size(); ++i)
    out += detail::str(i ? ", " : "", v[i]);
  return out + ")";
}

// Validates sorted, distinct axes within rank.
void check_axes(const std::string& prim, const Axes& axes, std::int64_t rank) {
  for (std::size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= rank || (i > 0 && axes[i] <= axes[i - 1]))
      rules::fail(prim, detail::str("axes ", axes_str(axes),
                                    " must be sorted, distinct and within [0, ", rank, ")"));
}

std::vector<AVal> reduce_rule(const std::string& prim, std::span<const AVal> in,
                              const ir::Params& p) {
  rules::expect_arity(prim, in, 1);
  const Axes& axes = p.get<Axes>("axes");
  check_axes(prim, axes, in[0].shape.rank());
  if (in[0].dtype == DType::bool_)
    rules::fail(prim, detail::str("expected a numeric operand, got ", in[0]));
  Axes dims;
  for (std::int64_t i = 0; i < in[0].shape.rank(); ++i)
    if (!std::binary_search(axes.begin(), axes.end(), i))
      dims.push_back(in[0].shape.dims()[static_cast<std::size_t>(i)]);
  return {{Shape(dims), in[0].dtype}};
}

// The operand axes a reduction kept, as result->operand broadcast dimensions.
Axes kept_axes(std::int64_t rank, const Axes& reduced) {
  Axes kept;
  for (std::int64_t i = 0; i < rank; ++i)
    if (!std::binary_search(reduced.begin(), reduced.end(), i)) kept.push_back(i);
  return kept;
}

}  // namespace

const ir::Primitive reduce_sum_p(
    "reduce_sum",
    [](std::span<const AVal> in, const ir::Params& p) { return reduce_rule("reduce_sum", in, p); },
    [](const VjpArgs& a) {
      const Array& x = a.inputs[0];
      return std::vector<Array>{broadcast_in_dim(a.cotangents[0], x.shape(),
                                                 kept_axes(x.rank(), a.params.get<Axes>("axes")))};
    });

const ir::Primitive reduce_max_p(
    "reduce_max",
    [](std::span<const AVal> in, const ir::Params& p) { return reduce_rule("reduce_max", in, p); },
    [](const VjpArgs& a) {
      // JAX's _reduce_chooser_jvp_rule: the gradient is shared evenly among the maxima.
      const Array& x = a.inputs[0];
      const Axes kept = kept_axes(x.rank(), a.params.get<Axes>("axes"));
      const Array location =
          convert_element_type(eq(x, broadcast_in_dim(a.outputs[0], x.shape(), kept)), x.dtype());
      const Array counts = reduce_sum(location, a.params.get<Axes>("axes"));
      return std::vector<Array>{
          div(mul(broadcast_in_dim(a.cotangents[0], x.shape(), kept), location),
              broadcast_in_dim(counts, x.shape(), kept))};
    });

const ir::Primitive broadcast_in_dim_p(
    "broadcast_in_dim",
    [](std::span<const AVal> in, const ir::Params& p) {
      rules::expect_arity("broadcast_in_dim", in, 1);
      const Shape shape(p.get<Axes>("shape"));
      const Axes& dims = p.get<Axes>("broadcast_dimensions");
      const Shape& op = in[0].shape;
      if (static_cast<std::int64_t>(dims.size()) != op.rank())
        rules::fail("broadcast_in_dim", detail::str("operand ", in[0], " needs ", op.rank(),
                                                    " broadcast_dimensions, got ", axes_str(dims)));
      for (std::size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] < 0 || dims[i] >= shape.rank() || (i > 0 && dims[i] <= dims[i - 1]))
          rules::fail("broadcast_in_dim",
                      detail::str("broadcast_dimensions ", axes_str(dims),
                                  " must be increasing and within the result rank ", shape.rank()));
        const std::int64_t d = op.dims()[i], r = shape.dims()[static_cast<std::size_t>(dims[i])];
        if (d != 1 && d != r)
          rules::fail("broadcast_in_dim",
                      detail::str("operand ", in[0], " axis ", i, " has size ", d,
                                  ", which cannot broadcast to size ", r, " of ", shape));
      }
      return std::vector<AVal>{{shape, in[0].dtype}};
    },
    [](const VjpArgs& a) {
      // Sum over the new axes, then over the operand's size-1 axes that were expanded.
      const Array& x = a.inputs[0];
      const Axes& dims = a.params.get<Axes>("broadcast_dimensions");
      const Shape& out = a.outputs[0].shape();
      Axes sum_axes;
      for (std::int64_t i = 0; i < out.rank(); ++i) {
        const auto it = std::find(dims.begin(), dims.end(), i);
        const bool expanded = it != dims.end() &&
                              x.shape().dims()[static_cast<std::size_t>(it - dims.begin())] == 1 &&
                              out.dims()[static_cast<std::size_t>(i)] != 1;
        if (it == dims.end() || expanded) sum_axes.push_back(i);
      }
      Array ct = sum_axes.empty() ? a.cotangents[0] : reduce_sum(a.cotangents[0], sum_axes);
      if (ct.shape() != x.shape()) ct = reshape(ct, x.shape());
      return std::vector<Array>{ct};
    });

const ir::Primitive reshape_p(
    "reshape",
    [](std::span<const AVal> in, const ir::Params& p) {
      rules::expect_arity("reshape", in, 1);
      const Shape shape(p.get<Axes>("new_sizes"));
      if (shape.size() != in[0].shape.size())
        rules::fail("reshape",
                    detail::str("cannot reshape ", in[0], " (", in[0].shape.size(),
                                " elements) to ", shape, " (", shape.size(), " elements)"));
      return std::vector<AVal>{{shape, in[0].dtype}};
    },
    [](const VjpArgs& a) {
      return std::vector<Array>{reshape(a.cotangents[0], a.inputs[0].shape())};
    });

const ir::Primitive transpose_p(
    "transpose",
    [](std::span<const AVal> in, const ir::Params& p) {
      rules::expect_arity("transpose", in, 1);
      const Axes& perm = p.get<Axes>("permutation");
      Axes sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      Axes iota(static_cast<std::size_t>(in[0].shape.rank()));
      std::iota(iota.begin(), iota.end(), 0);
      if (sorted != iota)
        rules::fail("transpose", detail::str("permutation ", axes_str(perm),
                                             " is not a permutation of the axes of ", in[0]));
      Axes dims;
      for (std::int64_t axis : perm)
        dims.push_back(in[0].shape.dims()[static_cast<std::size_t>(axis)]);
      return std::vector<AVal>{{Shape(dims), in[0].dtype}};
    },
    [](const VjpArgs& a) {
      const Axes& perm = a.params.get<Axes>("permutation");
      Axes inverse(perm.size());
      for (std::size_t i = 0; i < perm.size(); ++i)
        inverse[static_cast<std::size_t>(perm[i])] = static_cast<std::int64_t>(i);
      return std::vector<Array>{transpose(a.cotangents[0], inverse)};
    });

const ir::Primitive select_n_p(
    "select_n",
    [](std::span<const AVal> in, const ir::Params&) {
      if (in.size() < 2) rules::fail("select_n", "expected a selector and at least one case");
      const AVal& which = in[0];
      if (which.dtype != DType::bool_ && which.dtype != DType::i32)
        rules::fail("select_n", detail::str("the selector must be bool or int32, got ", which));
      if (which.dtype == DType::bool_ && in.size() > 3)
        rules::fail("select_n",
                    detail::str("a bool selector picks between 2 cases, got ", in.size() - 1));
      for (std::size_t i = 2; i < in.size(); ++i)
        if (in[i] != in[1])
          rules::fail("select_n", detail::str("all cases must have one aval, got ",
                                              rules::avals_str(in.subspan(1))));
      if (which.shape.rank() != 0 && which.shape != in[1].shape)
        rules::fail("select_n", detail::str("the selector ", which,
                                            " must be 0-d or have the cases' shape ", in[1].shape));
      return std::vector<AVal>{in[1]};
    },
    [](const VjpArgs& a) {
      std::vector<Array> cts(a.inputs.size());
      const Array& ct = a.cotangents[0];
      const Array zeros = zeros_like(ct);
      for (std::size_t i = 1; i < a.inputs.size(); ++i) {
        std::vector<Array> cases(a.inputs.size() - 1, zeros);
        cases[i - 1] = ct;
        cts[i] = select_n(a.inputs[0], cases);
      }
      return cts;
    });

const ir::Primitive convert_element_type_p(
    "convert_element_type",
    [](std::span<const AVal> in, const ir::Params& p) {
      rules::expect_arity("convert_element_type", in, 1);
      return std::vector<AVal>{{in[0].shape, p.get<DType>("new_dtype")}};
    },
    [](const VjpArgs& a) {
      const DType from = a.inputs[0].dtype();
      if (!is_floating(from) || !is_floating(a.outputs[0].dtype()))
        return std::vector<Array>{Array()};
      return std::vector<Array>{convert_element_type(a.cotangents[0], from)};
    });

const ir::Primitive stop_gradient_p(
    "stop_gradient",
    [](std::span<const AVal> in, const ir::Params&) {
      rules::expect_arity("stop_gradient", in, 1);
      return std::vector<AVal>{in[0]};
    },
    [](const VjpArgs&) { return std::vector<Array>{Array()}; });

const ir::Primitive name_p(
    "name",
    [](std::span<const AVal> in, const ir::Params&) {
      rules::expect_arity("name", in, 1);
      return std::vector<AVal>{in[0]};
    },
    // JAX names only the primal; the cotangent flows through unnamed.
    [](const VjpArgs& a) { return std::vector<Array>{a.cotangents[0]}; });

Array reduce_sum(const Array& x, std::vector<std::int64_t> axes) {
  const Array in[] = {x};
  return ir::bind1(reduce_sum_p, in, {{"axes", std::move(axes)}});
}
Array reduce_max(const Array& x, std::vector<std::int64_t> axes) {
  const Array in[] = {x};
  return ir::bind1(reduce_max_p, in, {{"axes", std::move(axes)}});
}
Array broadcast_in_dim(const Array& x, const Shape& shape,
                       std::vector<std::int64_t> broadcast_dimensions) {
  const Array in[] = {x};
  return ir::bind1(
      broadcast_in_dim_p, in,
      {{"shape", shape.dims()}, {"broadcast_dimensions", std::move(broadcast_dimensions)}});
}
Array reshape(const Array& x, const Shape& new_sizes) {
  const Array in[] = {x};
  return ir::bind1(reshape_p, in, {{"new_sizes", new_sizes.dims()}});
}
Array transpose(const Array& x, std::vector<std::int64_t> permutation) {
  Axes identity(permutation.size());
  std::iota(identity.begin(), identity.end(), 0);
  if (permutation == identity && x.rank() == static_cast<std::int64_t>(identity.size())) return x;
  const Array in[] = {x};
  return ir::bind1(transpose_p, in, {{"permutation", std::move(permutation)}});
}
Array select_n(const Array& which, std::span<const Array> cases) {
  std::vector<Array> in{which};
  in.insert(in.end(), cases.begin(), cases.end());
  return ir::bind1(select_n_p, in);
}
Array select(const Array& pred, const Array& on_true, const Array& on_false) {
  const Array cases[] = {on_false, on_true};
  return select_n(pred, cases);
}
Array convert_element_type(const Array& x, DType new_dtype) {
  if (x.dtype() == new_dtype) return x;
  const Array in[] = {x};
  return ir::bind1(convert_element_type_p, in, {{"new_dtype", new_dtype}});
}
Array stop_gradient(const Array& x) {
  const Array in[] = {x};
  return ir::bind1(stop_gradient_p, in);
}
Array checkpoint_name(const Array& x, const std::string& name) {
  const Array in[] = {x};
  return ir::bind1(name_p, in, {{"name", name}});
}

Array scalar(double value, DType dtype) {
  return Array::full(Shape{}, value, dtype);
}
Array full_like(const Array& x, double value) {
  const Array s = scalar(value, x.dtype());
  return x.rank() == 0 ? s : broadcast_in_dim(s, x.shape(), {});
}
Array zeros_like(const Array& x) {
  return full_like(x, 0.0);
}

namespace {

// Each result leads with the batch axis.
const bool structural_batching_registered = [] {
  using rules::past_batch_axis;
  using rules::prefixed;
  ir::register_batching(reduce_sum_p, rules::batch_along_axes({"axes"}));
  ir::register_batching(reduce_max_p, rules::batch_along_axes({"axes"}));
  ir::register_batching(
      broadcast_in_dim_p, rules::batch_every_operand([](const ir::BatchArgs& a) {
        ir::Params p =
            rules::with_param(a.params, "shape", prefixed(a.size, a.params.get<Axes>("shape")));
        p.set("broadcast_dimensions",
              prefixed(0, past_batch_axis(a.params.get<Axes>("broadcast_dimensions"))));
        return p;
      }));
  ir::register_batching(reshape_p, rules::batch_every_operand([](const ir::BatchArgs& a) {
                          return rules::with_param(
                              a.params, "new_sizes",
                              prefixed(a.size, a.params.get<Axes>("new_sizes")));
                        }));
  ir::register_batching(transpose_p, rules::batch_every_operand([](const ir::BatchArgs& a) {
                          return rules::with_param(
                              a.params, "permutation",
                              prefixed(0, past_batch_axis(a.params.get<Axes>("permutation"))));
                        }));
  ir::register_batching(select_n_p, rules::batch_elementwise(1));
  for (const ir::Primitive* p : {&convert_element_type_p, &stop_gradient_p, &name_p})
    ir::register_batching(*p, rules::batch_elementwise(0));
  return true;
}();

}  // namespace

}  // namespace flaxpp::lax
