// conv_general_dilated: jax.lax's convolution — its shape rule (JAX's
// _conv_general_dilated_shape_rule) and its VJP, JAX's transpose rules, in which both cotangents
// are convolutions again: the input's with the kernel reversed and the forward strides as an
// lhs dilation, the kernel's with input and cotangent as the operands and feature groups as
// batch groups (jax/_src/lax/convolution.py).
#include <algorithm>
#include <numeric>

#include "flaxpp/ir/lax_convolution.hpp"
#include "flaxpp/kernels/window.hpp"
#include "rules.hpp"

namespace flaxpp::lax {
namespace {

using Axes = std::vector<std::int64_t>;
const char* const kConv = "conv_general_dilated";

using rules::dilate;
using rules::list_str;

// The spatial axes of a spec (all but its first two).
Axes spatial_of(const Axes& spec) {
  return Axes(spec.begin() + 2, spec.end());
}

Axes sizes_at(const Axes& dims, const Axes& axes) {
  Axes out;
  for (const std::int64_t a : axes)
    out.push_back(dims[static_cast<std::size_t>(a)]);
  return out;
}

ConvDimensionNumbers dimension_numbers_of(const ir::Params& p) {
  return {p.get<Axes>("lhs_spec"), p.get<Axes>("rhs_spec"), p.get<Axes>("out_spec")};
}

void check_spec(const char* name, const Axes& spec, std::int64_t rank) {
  Axes sorted = spec;
  std::sort(sorted.begin(), sorted.end());
  Axes want(static_cast<std::size_t>(rank));
  std::iota(want.begin(), want.end(), 0);
  if (sorted != want)
    rules::fail(kConv, detail::str(name, " ", list_str(spec), " must be a permutation of the ",
                                   rank, " axes of its operand"));
}

std::vector<AVal> conv_rule(std::span<const AVal> in, const ir::Params& p) {
  rules::expect_arity(kConv, in, 2);
  const AVal &lhs = in[0], &rhs = in[1];
  rules::expect_floating(kConv, lhs);
  if (lhs.dtype != rhs.dtype || lhs.shape.rank() != rhs.shape.rank() || lhs.shape.rank() < 2)
    rules::fail(kConv, detail::str("expected lhs and rhs of one floating dtype and one rank of at "
                                   "least 2, got ",
                                   rules::avals_str(in)));
  const std::int64_t rank = lhs.shape.rank(), spatial = rank - 2;
  if (spatial > kernels::kMaxWindowRank)
    rules::fail(kConv, detail::str("at most ", kernels::kMaxWindowRank,
                                   " spatial axes are supported, got ", spatial));
  const ConvDimensionNumbers dn = dimension_numbers_of(p);
  check_spec("lhs_spec", dn.lhs_spec, rank);
  check_spec("rhs_spec", dn.rhs_spec, rank);
  check_spec("out_spec", dn.out_spec, rank);
  const auto expect_per_axis = [&](const char* name, bool positive) {
    const Axes& v = p.get<Axes>(name);
    if (static_cast<std::int64_t>(v.size()) != spatial)
      rules::fail(kConv, detail::str(name, " ", list_str(v), " needs one entry per spatial axis (",
                                     spatial, ")"));
    if (positive && std::any_of(v.begin(), v.end(), [](std::int64_t x) { return x < 1; }))
      rules::fail(kConv, detail::str(name, " ", list_str(v), " must be positive"));
    return v;
  };
  const Axes strides = expect_per_axis("window_strides", true);
  const Axes lhs_dilation = expect_per_axis("lhs_dilation", true);
  const Axes rhs_dilation = expect_per_axis("rhs_dilation", true);
  const Axes low = expect_per_axis("padding_low", false),
             high = expect_per_axis("padding_high", false);
  const std::int64_t groups = p.get<std::int64_t>("feature_group_count");
  const std::int64_t batch_groups = p.get<std::int64_t>("batch_group_count");
  const Axes &ld = lhs.shape.dims(), &rd = rhs.shape.dims();
  const std::int64_t batch = ld[static_cast<std::size_t>(dn.lhs_spec[0])];
  const std::int64_t features = ld[static_cast<std::size_t>(dn.lhs_spec[1])];
  const std::int64_t out_features = rd[static_cast<std::size_t>(dn.rhs_spec[0])];
  const std::int64_t in_features = rd[static_cast<std::size_t>(dn.rhs_spec[1])];
  if (groups < 1 || batch_groups < 1 || (groups > 1 && batch_groups > 1))
    rules::fail(kConv, detail::str("feature_group_count ", groups, " and batch_group_count ",
                                   batch_groups, " must be positive, at most one above 1"));
  if (features % groups != 0 || features / groups != in_features)
    rules::fail(kConv, detail::str("the lhs has ", features, " features in ", groups,
                                   " group(s), so the rhs's input feature axis must have ",
                                   features / std::max<std::int64_t>(groups, 1), "; got ",
                                   rules::avals_str(in)));
  if (out_features % (groups * batch_groups) != 0 || batch % batch_groups != 0)
    rules::fail(kConv, detail::str("the rhs's output features (", out_features,
                                   ") must be a multiple of the group count and the lhs batch (",
                                   batch, ") of batch_group_count (", batch_groups, ")"));
  Axes out(static_cast<std::size_t>(rank));
  out[static_cast<std::size_t>(dn.out_spec[0])] = batch / batch_groups;
  out[static_cast<std::size_t>(dn.out_spec[1])] = out_features;
  for (std::int64_t s = 0; s < spatial; ++s) {
    const auto i = static_cast<std::size_t>(s);
    const std::int64_t padded =
        dilate(ld[static_cast<std::size_t>(dn.lhs_spec[i + 2])], lhs_dilation[i]) + low[i] +
        high[i];
    if (padded < 0)
      rules::fail(kConv, detail::str("negative padding (", low[i], ", ", high[i],
                                     ") is larger than spatial axis ", s, " of ", lhs));
    const std::int64_t kernel_size = rd[static_cast<std::size_t>(dn.rhs_spec[i + 2])];
    if (kernel_size < 1)
      rules::fail(kConv, detail::str("spatial axis ", s, " of the kernel ", rhs, " is empty"));
    const std::int64_t window = dilate(kernel_size, rhs_dilation[i]);
    out[static_cast<std::size_t>(dn.out_spec[i + 2])] =
        padded < window ? 0 : (padded - window) / strides[i] + 1;
  }
  return {{Shape(out), lhs.dtype}};
}

Array bind_conv(const Array& lhs, const Array& rhs, const Axes& strides, const Padding& padding,
                const Axes& lhs_dilation, const Axes& rhs_dilation, const ConvDimensionNumbers& dn,
                std::int64_t feature_group_count, std::int64_t batch_group_count) {
  const Array in[] = {lhs, rhs};
  return ir::bind1(conv_general_dilated_p, in,
                   rules::with_padding({{"window_strides", strides},
                                        {"lhs_dilation", lhs_dilation},
                                        {"rhs_dilation", rhs_dilation},
                                        {"lhs_spec", dn.lhs_spec},
                                        {"rhs_spec", dn.rhs_spec},
                                        {"out_spec", dn.out_spec},
                                        {"feature_group_count", feature_group_count},
                                        {"batch_group_count", batch_group_count}},
                                       padding));
}

// JAX's _reshape_axis_out_of: axis `src` split into (size1, rest).
Array reshape_axis_out_of(std::int64_t src, std::int64_t size1, const Array& x) {
  Axes dims = x.shape().dims();
  const auto i = static_cast<std::size_t>(src);
  const std::int64_t size2 = dims[i] / size1;
  dims[i] = size2;
  dims.insert(dims.begin() + src, size1);
  return reshape(x, Shape(dims));
}

// JAX's _reshape_axis_into: axis `src` merged into axis `dst` (numbered without src), in front
// of it.
Array reshape_axis_into(std::int64_t src, std::int64_t dst, const Array& x) {
  Axes perm;
  for (std::int64_t i = 0; i < x.rank(); ++i)
    if (i != src) perm.push_back(i);
  perm.insert(perm.begin() + dst, src);
  Axes dims = x.shape().dims();
  const std::int64_t size = dims[static_cast<std::size_t>(src)];
  dims.erase(dims.begin() + src);
  dims[static_cast<std::size_t>(dst)] *= size;
  return reshape(transpose(x, perm), Shape(dims));
}

Axes swap_first_two(Axes spec) {
  std::swap(spec[0], spec[1]);
  return spec;
}

// The padding of a transposed windowed op, per axis from the dilated sizes of the operand, the
// window and the result (spread by the strides), and the forward low padding, as `pick`
// computes it.
template <class Pick>
Padding vjp_padding(const Axes& in_shape, const Axes& window, const Axes& strides,
                    const Axes& out_shape, const Padding& padding, const Axes& lhs_dilation,
                    const Axes& rhs_dilation, Pick pick) {
  Padding out;
  for (std::size_t i = 0; i < in_shape.size(); ++i)
    out.push_back(pick(dilate(in_shape[i], lhs_dilation[i]), dilate(window[i], rhs_dilation[i]),
                       dilate(out_shape[i], strides[i]), padding[i].first));
  return out;
}

}  // namespace

Padding rules::conv_vjp_lhs_padding(const Axes& in_shape, const Axes& window, const Axes& strides,
                                    const Axes& out_shape, const Padding& padding,
                                    const Axes& lhs_dilation, const Axes& rhs_dilation) {
  return vjp_padding(in_shape, window, strides, out_shape, padding, lhs_dilation, rhs_dilation,
                     [](std::int64_t lhs, std::int64_t rhs, std::int64_t out, std::int64_t lo) {
                       const std::int64_t before = rhs - lo - 1;
                       return std::pair{before, lhs + rhs - 1 - out - before};
                     });
}

namespace {

// JAX's _conv_general_vjp_rhs_padding.
Padding conv_vjp_rhs_padding(const Axes& in_shape, const Axes& window, const Axes& strides,
                             const Axes& out_shape, const Padding& padding,
                             const Axes& lhs_dilation, const Axes& rhs_dilation) {
  return vjp_padding(in_shape, window, strides, out_shape, padding, lhs_dilation, rhs_dilation,
                     [](std::int64_t lhs, std::int64_t rhs, std::int64_t out, std::int64_t lo) {
                       return std::pair{lo, (out - lhs) + (rhs - lo - 1)};
                     });
}

std::vector<Array> conv_vjp(const ir::VjpArgs& a) {
  const Array &g = a.cotangents[0], &lhs = a.inputs[0], &rhs = a.inputs[1];
  const ir::Params& p = a.params;
  const ConvDimensionNumbers dn = dimension_numbers_of(p);
  const Axes &strides = p.get<Axes>("window_strides"), &lhs_dilation = p.get<Axes>("lhs_dilation"),
             &rhs_dilation = p.get<Axes>("rhs_dilation");
  const Padding padding = rules::padding_of(p);
  const std::int64_t groups = p.get<std::int64_t>("feature_group_count");
  const std::int64_t batch_groups = p.get<std::int64_t>("batch_group_count");
  const Axes lhs_s = sizes_at(lhs.shape().dims(), spatial_of(dn.lhs_spec));
  const Axes rhs_s = sizes_at(rhs.shape().dims(), spatial_of(dn.rhs_spec));
  const Axes out_s = sizes_at(g.shape().dims(), spatial_of(dn.out_spec));

  // _conv_general_dilated_transpose_lhs.
  Array kernel = rhs;
  std::int64_t lhs_groups = groups;
  if (groups > 1 || batch_groups > 1) {
    const std::int64_t count = std::max(groups, batch_groups);
    kernel = reshape_axis_into(dn.rhs_spec[0], dn.rhs_spec[1],
                               reshape_axis_out_of(dn.rhs_spec[0], count, kernel));
    lhs_groups = count;
  }
  const Padding lhs_padding = rules::conv_vjp_lhs_padding(lhs_s, rhs_s, strides, out_s, padding,
                                                          lhs_dilation, rhs_dilation);
  Array dlhs = bind_conv(g, rev(kernel, spatial_of(dn.rhs_spec)), lhs_dilation, lhs_padding,
                         strides, rhs_dilation,
                         {dn.out_spec, swap_first_two(dn.rhs_spec), dn.lhs_spec}, lhs_groups, 1);
  if (batch_groups > 1)
    dlhs = reshape_axis_into(dn.lhs_spec[1], dn.lhs_spec[0],
                             reshape_axis_out_of(dn.lhs_spec[1], batch_groups, dlhs));

  // _conv_general_dilated_transpose_rhs: feature groups become batch groups and back.
  const Padding rhs_padding =
      conv_vjp_rhs_padding(lhs_s, rhs_s, strides, out_s, padding, lhs_dilation, rhs_dilation);
  const Array drhs = bind_conv(
      lhs, g, rhs_dilation, rhs_padding, lhs_dilation, strides,
      {swap_first_two(dn.lhs_spec), swap_first_two(dn.out_spec), swap_first_two(dn.rhs_spec)},
      batch_groups, groups);
  return {dlhs, drhs};
}

}  // namespace

const ir::Primitive conv_general_dilated_p(kConv, conv_rule, conv_vjp);

namespace {

// JAX's _conv_general_dilated_batch_rule (the batch axis first on batched operands): a batched
// lhs alone joins its batch axis (without batch groups); a batched rhs alone joins its output
// features (without groups); otherwise both are batched (an unbatched one broadcast) and the
// examples become feature groups (batch groups when there are some).
ir::BatchedResults conv_batched(const ir::BatchArgs& a) {
  const ir::Params& p = a.params;
  const ConvDimensionNumbers dn = dimension_numbers_of(p);
  const std::int64_t groups = p.get<std::int64_t>("feature_group_count");
  const std::int64_t batch_groups = p.get<std::int64_t>("batch_group_count");
  const auto conv = [&](const Array& lhs, const Array& rhs, std::int64_t g, std::int64_t bg) {
    const Array in[] = {lhs, rhs};
    ir::Params q = rules::with_param(p, "feature_group_count", g);
    return ir::bind1(conv_general_dilated_p, in, rules::with_param(q, "batch_group_count", bg));
  };
  const std::int64_t n = a.size;
  Array out;
  std::int64_t out_axis = 0;
  if (a.batched[0] && !a.batched[1] && batch_groups == 1) {
    out = conv(reshape_axis_into(0, dn.lhs_spec[0], a.inputs[0]), a.inputs[1], groups, 1);
    out = reshape_axis_out_of(dn.out_spec[0], n, out);
    out_axis = dn.out_spec[0];
  } else if (!a.batched[0] && a.batched[1] && groups == 1 && batch_groups == 1) {
    out = conv(a.inputs[0], reshape_axis_into(0, dn.rhs_spec[0], a.inputs[1]), 1, 1);
    out = reshape_axis_out_of(dn.out_spec[1], n, out);
    out_axis = dn.out_spec[1];
  } else {
    const Array lhs = ir::with_batch_axis(a.inputs[0], a.batched[0], n);
    const Array rhs = ir::with_batch_axis(a.inputs[1], a.batched[1], n);
    const bool by_batch = batch_groups > 1;
    out = conv(reshape_axis_into(0, by_batch ? dn.lhs_spec[0] : dn.lhs_spec[1], lhs),
               reshape_axis_into(0, dn.rhs_spec[0], rhs), by_batch ? groups : groups * n,
               by_batch ? batch_groups * n : batch_groups);
    out = reshape_axis_out_of(dn.out_spec[1], n, out);
    out_axis = dn.out_spec[1];
  }
  return {{ir::move_axis(out, out_axis, 0)}, {true}};
}

const bool conv_batching_registered = [] {
  ir::register_batching(conv_general_dilated_p, conv_batched);
  return true;
}();

}  // namespace

ConvDimensionNumbers conv_dimension_numbers(const std::string& lhs, const std::string& rhs,
                                            const std::string& out) {
  if (lhs.size() != rhs.size() || lhs.size() != out.size() || lhs.size() < 2)
    throw ValueError(
        detail::str("conv_dimension_numbers: expected three layout strings of one "
                    "length (at least 2), got \"",
                    lhs, "\", \"", rhs, "\", \"", out, "\""));
  const auto axis_of = [](const std::string& layout, char letter) {
    const std::size_t at = layout.find(letter);
    if (at == std::string::npos || layout.find(letter, at + 1) != std::string::npos)
      throw ValueError(detail::str("conv_dimension_numbers: layout \"", layout,
                                   "\" must name axis '", letter, "' exactly once"));
    return static_cast<std::int64_t>(at);
  };
  ConvDimensionNumbers dn{{axis_of(lhs, 'N'), axis_of(lhs, 'C')},
                          {axis_of(rhs, 'O'), axis_of(rhs, 'I')},
                          {axis_of(out, 'N'), axis_of(out, 'C')}};
  for (const char letter : lhs) {
    if (letter == 'N' || letter == 'C') continue;
    dn.lhs_spec.push_back(axis_of(lhs, letter));
    dn.rhs_spec.push_back(axis_of(rhs, letter));
    dn.out_spec.push_back(axis_of(out, letter));
  }
  return dn;
}

Padding padtype_to_pads(const Axes& in_shape, const Axes& window_shape, const Axes& window_strides,
                        const std::string& padding) {
  if (padding == "VALID") return Padding(in_shape.size(), {0, 0});
  if (padding != "SAME" && padding != "SAME_LOWER")
    throw ValueError(
        detail::str("padding: expected \"SAME\", \"SAME_LOWER\" or \"VALID\" (or "
                    "explicit (low, high) pairs), got \"",
                    padding, "\""));
  if (window_shape.size() != in_shape.size() || window_strides.size() != in_shape.size())
    throw ValueError(detail::str("padding \"", padding, "\": the window ", list_str(window_shape),
                                 " and strides ", list_str(window_strides),
                                 " need one entry per axis of ", list_str(in_shape)));
  Padding out;
  for (std::size_t i = 0; i < in_shape.size(); ++i) {
    const std::int64_t stride = window_strides[i];
    const std::int64_t out_size = (in_shape[i] + stride - 1) / stride;
    const std::int64_t total =
        std::max<std::int64_t>((out_size - 1) * stride + window_shape[i] - in_shape[i], 0);
    if (padding == "SAME")
      out.emplace_back(total / 2, total - total / 2);
    else
      out.emplace_back(total - total / 2, total / 2);
  }
  return out;
}

Padding resolve_padding(const PaddingSpec& padding, const Axes& in_shape, const Axes& window_shape,
                        const Axes& window_strides) {
  if (const auto* name = std::get_if<std::string>(&padding))
    return padtype_to_pads(in_shape, window_shape, window_strides, *name);
  const Padding& pairs = std::get<Padding>(padding);
  if (pairs.size() != in_shape.size())
    throw ValueError(detail::str("padding: expected one (low, high) pair per axis of ",
                                 list_str(in_shape), ", got ", pairs.size(), " pairs"));
  return pairs;
}

Array conv_transpose(const Array& lhs, const Array& rhs, const Axes& strides,
                     const PaddingSpec& padding, Axes rhs_dilation, ConvDimensionNumbers dn,
                     bool transpose_kernel) {
  if (lhs.rank() != rhs.rank() || lhs.rank() < 2)
    throw ValueError(detail::str("conv_transpose: expected lhs and rhs of one rank >= 2, got ",
                                 lhs.aval(), " and ", rhs.aval()));
  const auto spatial = static_cast<std::size_t>(lhs.rank() - 2);
  if (dn.lhs_spec.empty()) {
    // JAX's defaults: N, the spatial axes, C; kernel spatial axes, I, O.
    std::string image = "N", kernel;
    for (std::size_t s = 0; s < spatial; ++s) {
      image += static_cast<char>('a' + s);  // spatial: any letters but N, C, I, O
      kernel += static_cast<char>('a' + s);
    }
    dn = conv_dimension_numbers(image + "C", kernel + "IO", image + "C");
  }
  if (strides.size() != spatial)
    throw ValueError(detail::str("conv_transpose: strides ", list_str(strides), " need one entry ",
                                 "per spatial axis (", spatial, ")"));
  if (rhs_dilation.empty()) rhs_dilation = Axes(spatial, 1);
  Padding pads;
  if (const auto* mode = std::get_if<std::string>(&padding)) {
    // JAX's _conv_transpose_padding against the dilated kernel.
    for (std::size_t s = 0; s < spatial; ++s) {
      const std::int64_t k = dilate(rhs.shape()[dn.rhs_spec[s + 2]], rhs_dilation[s]);
      const std::int64_t stride = strides[s];
      std::int64_t before = 0, total = 0;
      if (*mode == "SAME") {
        total = k + stride - 2;
        before = stride > k - 1 ? k - 1 : (total + 1) / 2;
      } else if (*mode == "VALID") {
        total = k + stride - 2 + std::max<std::int64_t>(k - stride, 0);
        before = k - 1;
      } else {
        throw ValueError(
            detail::str("conv_transpose: padding must be \"SAME\", \"VALID\" or "
                        "(low, high) pairs, got \"",
                        *mode, "\""));
      }
      pads.emplace_back(before, total - before);
    }
  } else {
    pads = std::get<Padding>(padding);
  }
  Array kernel = rhs;
  if (transpose_kernel) {
    kernel = rev(kernel, spatial_of(dn.rhs_spec));
    Axes perm(static_cast<std::size_t>(kernel.rank()));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[static_cast<std::size_t>(dn.rhs_spec[0])],
              perm[static_cast<std::size_t>(dn.rhs_spec[1])]);
    kernel = transpose(kernel, perm);
  }
  return bind_conv(lhs, kernel, Axes(spatial, 1), pads, strides, rhs_dilation, dn, 1, 1);
}

Array conv_general_dilated(const Array& lhs, const Array& rhs, const ConvOptions& options) {
  const std::int64_t spatial = std::max<std::int64_t>(lhs.rank() - 2, 0);
  const auto or_ones = [&](const Axes& v) {
    return v.empty() ? Axes(static_cast<std::size_t>(spatial), 1) : v;
  };
  ConvDimensionNumbers dn = options.dimension_numbers;
  if (dn.lhs_spec.empty() && dn.rhs_spec.empty() && dn.out_spec.empty()) {
    Axes identity(static_cast<std::size_t>(lhs.rank()));
    std::iota(identity.begin(), identity.end(), 0);
    dn = {identity, identity, identity};
  }
  const Padding padding = options.padding.empty()
                              ? Padding(static_cast<std::size_t>(spatial), {0, 0})
                              : options.padding;
  return bind_conv(lhs, rhs, or_ones(options.window_strides), padding,
                   or_ones(options.lhs_dilation), or_ones(options.rhs_dilation), dn,
                   options.feature_group_count, options.batch_group_count);
}

}  // namespace flaxpp::lax
