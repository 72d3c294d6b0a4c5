// Reductions over windows: reduce_window_sum and reduce_window_max (jax.lax.reduce_window with
// add and max), and select_and_scatter_add, the transpose of max's choice — shape rules and
// VJPs as jax/_src/lax/windowed_reductions.py has them.
#include <algorithm>

#include "flaxpp/ir/lax_windowed.hpp"
#include "flaxpp/kernels/window.hpp"
#include "rules.hpp"

namespace flaxpp::lax {
namespace {

using Axes = std::vector<std::int64_t>;

// The result shape of a window over x, checking the window params (one entry per axis of x).
Shape window_result(const std::string& prim, const AVal& x, const ir::Params& p) {
  rules::expect_floating(prim, x);
  const std::int64_t rank = x.shape.rank();
  if (rank > kernels::kMaxWindowRank)
    rules::fail(prim,
                detail::str("at most ", kernels::kMaxWindowRank, " axes are supported, got ", x));
  const auto per_axis = [&](const char* name, bool positive) {
    const Axes& v = p.get<Axes>(name);
    if (static_cast<std::int64_t>(v.size()) != rank)
      rules::fail(prim,
                  detail::str(name, " ", rules::list_str(v), " needs one entry per axis of ", x));
    if (positive && std::any_of(v.begin(), v.end(), [](std::int64_t e) { return e < 1; }))
      rules::fail(prim, detail::str(name, " ", rules::list_str(v), " must be positive"));
    return v;
  };
  const Axes window = per_axis("window_dimensions", true),
             strides = per_axis("window_strides", true);
  const Axes low = per_axis("padding_low", false), high = per_axis("padding_high", false);
  const Axes base =
      p.has("base_dilation") ? per_axis("base_dilation", true) : Axes(window.size(), 1);
  const Axes wdil =
      p.has("window_dilation") ? per_axis("window_dilation", true) : Axes(window.size(), 1);
  Axes out;
  for (std::size_t i = 0; i < window.size(); ++i) {
    const std::int64_t padded = rules::dilate(x.shape.dims()[i], base[i]) + low[i] + high[i];
    const std::int64_t extent = rules::dilate(window[i], wdil[i]);
    if (padded < 0)
      rules::fail(prim, detail::str("negative padding (", low[i], ", ", high[i],
                                    ") is larger than axis ", i, " of ", x));
    out.push_back(padded < extent ? 0 : (padded - extent) / strides[i] + 1);
  }
  return Shape(out);
}

std::vector<AVal> reduce_window_rule(const std::string& prim, std::span<const AVal> in,
                                     const ir::Params& p) {
  rules::expect_arity(prim, in, 1);
  return {{window_result(prim, in[0], p), in[0].dtype}};
}

ir::Params window_params(const Array& x, const WindowOptions& w, bool dilations) {
  const std::size_t rank = static_cast<std::size_t>(x.rank());
  const auto or_ones = [&](const Axes& v) { return v.empty() ? Axes(rank, 1) : v; };
  ir::Params p = rules::with_padding(
      {{"window_dimensions", w.window_dimensions}, {"window_strides", or_ones(w.window_strides)}},
      w.padding.empty() ? Padding(rank, {0, 0}) : w.padding);
  if (dilations) {
    p = rules::with_param(p, "base_dilation", or_ones(w.base_dilation));
    p = rules::with_param(p, "window_dilation", or_ones(w.window_dilation));
  } else if (!w.base_dilation.empty() || !w.window_dilation.empty()) {
    throw ValueError("select_and_scatter_add: takes no dilations (JAX's has none either)");
  }
  return p;
}

// JAX's _reduce_window_sum_transpose_rule: the cotangent spread by the strides (interior
// padding), padded by the VJP padding of a convolution, then summed over windows again with the
// base dilation as strides.
std::vector<Array> reduce_window_sum_vjp(const ir::VjpArgs& a) {
  const Array& ct = a.cotangents[0];
  const Axes &window = a.params.get<Axes>("window_dimensions"),
             &strides = a.params.get<Axes>("window_strides"),
             &base = a.params.get<Axes>("base_dilation"),
             &wdil = a.params.get<Axes>("window_dilation");
  const Padding pads =
      rules::conv_vjp_lhs_padding(a.inputs[0].shape().dims(), window, strides, ct.shape().dims(),
                                  rules::padding_of(a.params), base, wdil);
  std::vector<PadConfig> config;
  for (std::size_t i = 0; i < pads.size(); ++i)
    config.push_back({pads[i].first, pads[i].second, strides[i] - 1});
  const Array padded = pad(ct, scalar(0, ct.dtype()), config);
  return {reduce_window_sum(padded, {.window_dimensions = window,
                                     .window_strides = base,
                                     .padding = {},
                                     .base_dilation = {},
                                     .window_dilation = wdil})};
}

// JAX's reduce_window_max JVP (_select_and_gather_add) transposed: each window's cotangent
// goes to the element it selected.
std::vector<Array> reduce_window_max_vjp(const ir::VjpArgs& a) {
  const auto ones = [](const Axes& v) {
    return std::all_of(v.begin(), v.end(), [](std::int64_t e) { return e == 1; });
  };
  if (!ones(a.params.get<Axes>("base_dilation")) || !ones(a.params.get<Axes>("window_dilation")))
    throw ValueError(
        "reduce_window_max: the gradient of a dilated max window is not supported (JAX's "
        "select_and_scatter_add has no dilation either)");
  return {select_and_scatter_add(a.cotangents[0], a.inputs[0],
                                 {.window_dimensions = a.params.get<Axes>("window_dimensions"),
                                  .window_strides = a.params.get<Axes>("window_strides"),
                                  .padding = rules::padding_of(a.params),
                                  .base_dilation = {},
                                  .window_dilation = {}})};
}

}  // namespace

const ir::Primitive reduce_window_sum_p(
    "reduce_window_sum",
    [](std::span<const AVal> in, const ir::Params& p) {
      return reduce_window_rule("reduce_window_sum", in, p);
    },
    reduce_window_sum_vjp);

const ir::Primitive reduce_window_max_p(
    "reduce_window_max",
    [](std::span<const AVal> in, const ir::Params& p) {
      return reduce_window_rule("reduce_window_max", in, p);
    },
    reduce_window_max_vjp);

const ir::Primitive select_and_scatter_add_p("select_and_scatter_add", [](std::span<const AVal> in,
                                                                          const ir::Params& p) {
  const char* const name = "select_and_scatter_add";
  rules::expect_arity(name, in, 2);
  const AVal want{window_result(name, in[1], p), in[1].dtype};
  if (in[0] != want)
    rules::fail(name, detail::str("the source must be ", want, ", the windows of the operand ",
                                  in[1], "; got ", in[0]));
  return std::vector<AVal>{in[1]};
});

namespace {

// The batch axis is one more axis the window passes over unchanged: size 1, stride 1, no
// padding or dilation.
const bool windowed_batching_registered = [] {
  const ir::BatchRule rule = rules::batch_every_operand([](const ir::BatchArgs& a) {
    ir::Params p = a.params;
    for (const char* name : {"window_dimensions", "window_strides", "base_dilation",
                             "window_dilation", "padding_low", "padding_high"}) {
      if (!a.params.has(name)) continue;
      const std::int64_t first = std::string_view(name).starts_with("padding") ? 0 : 1;
      p = rules::with_param(p, name, rules::prefixed(first, a.params.get<Axes>(name)));
    }
    return p;
  });
  ir::register_batching(reduce_window_sum_p, rule);
  ir::register_batching(reduce_window_max_p, rule);
  ir::register_batching(select_and_scatter_add_p, rule);
  return true;
}();

}  // namespace

Array reduce_window_sum(const Array& x, const WindowOptions& window) {
  const Array in[] = {x};
  return ir::bind1(reduce_window_sum_p, in, window_params(x, window, true));
}

Array reduce_window_max(const Array& x, const WindowOptions& window) {
  const Array in[] = {x};
  return ir::bind1(reduce_window_max_p, in, window_params(x, window, true));
}

Array select_and_scatter_add(const Array& source, const Array& operand,
                             const WindowOptions& window) {
  const Array in[] = {source, operand};
  return ir::bind1(select_and_scatter_add_p, in, window_params(operand, window, false));
}

}  // namespace flaxpp::lax
