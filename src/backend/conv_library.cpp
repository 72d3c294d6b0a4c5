#include "backend/conv_library.hpp"

#include <algorithm>

#include "backend/layout_plan.hpp"

namespace flaxpp::backend_impl {
namespace {

using Axes = std::vector<std::int64_t>;

bool all_one(const Axes& values) {
  return std::all_of(values.begin(), values.end(), [](std::int64_t v) { return v == 1; });
}

std::int64_t spatial_size(const Axes& dims, const Axes& spec) {
  std::int64_t n = 1;
  for (std::size_t i = 2; i < spec.size(); ++i)
    n *= dims[static_cast<std::size_t>(spec[i])];
  return n;
}

// The array of `dims` (operand `operand`) read with axes (first, second, spec's spatial axes).
ConvTensor view(int operand, const Axes& dims, const Axes& spec, std::int64_t first,
                std::int64_t second) {
  const Axes strides = row_major_strides(dims);
  ConvTensor t{operand, {}, {}};
  Axes order{first, second};
  order.insert(order.end(), spec.begin() + 2, spec.end());
  for (const std::int64_t axis : order) {
    t.dims.push_back(dims[static_cast<std::size_t>(axis)]);
    t.strides.push_back(strides[static_cast<std::size_t>(axis)]);
  }
  return t;
}

}  // namespace

std::optional<LibraryConv> as_library_conv(const Axes& lhs_dims, const Axes& rhs_dims,
                                           const Axes& out_dims, const ir::Params& params) {
  const Axes &lhs_spec = params.get<Axes>("lhs_spec"), &rhs_spec = params.get<Axes>("rhs_spec"),
             &out_spec = params.get<Axes>("out_spec");
  const Axes &window_strides = params.get<Axes>("window_strides"),
             &padding_low = params.get<Axes>("padding_low"),
             &lhs_dilation = params.get<Axes>("lhs_dilation"),
             &rhs_dilation = params.get<Axes>("rhs_dilation");
  const std::int64_t groups = params.get<std::int64_t>("feature_group_count");
  const auto has_zero = [](const Axes& dims) {
    return std::find(dims.begin(), dims.end(), 0) != dims.end();
  };
  if (params.get<std::int64_t>("batch_group_count") != 1 || has_zero(lhs_dims) ||
      has_zero(rhs_dims) || has_zero(out_dims) ||
      std::any_of(padding_low.begin(), padding_low.end(), [](std::int64_t p) { return p < 0; }))
    return std::nullopt;
  const std::size_t spatial = window_strides.size();
  LibraryConv c;
  c.pad_low = padding_low;
  if (all_one(lhs_dilation)) {
    if (groups == 1 && spatial_size(rhs_dims, rhs_spec) > spatial_size(out_dims, out_spec)) {
      // The kernel's cotangent: x is the lhs with batch and features exchanged, y the window.
      c.pass = ConvPass::backward_weights;
      c.x = view(0, lhs_dims, lhs_spec, lhs_spec[1], lhs_spec[0]);
      c.y = view(1, rhs_dims, rhs_spec, rhs_spec[1], rhs_spec[0]);
      c.w = view(2, out_dims, out_spec, out_spec[1], out_spec[0]);
      c.stride = rhs_dilation;
      c.dilation = window_strides;
    } else {
      c.pass = ConvPass::forward;
      c.groups = groups;
      c.x = view(0, lhs_dims, lhs_spec, lhs_spec[0], lhs_spec[1]);
      c.w = view(1, rhs_dims, rhs_spec, rhs_spec[0], rhs_spec[1]);
      c.y = view(2, out_dims, out_spec, out_spec[0], out_spec[1]);
      c.stride = window_strides;
      c.dilation = rhs_dilation;
    }
  } else {
    if (!all_one(window_strides) || groups != 1) return std::nullopt;
    // The input's cotangent: the reversed kernel with its features exchanged back.
    c.pass = ConvPass::backward_data;
    c.flip_w = true;
    c.x = view(2, out_dims, out_spec, out_spec[0], out_spec[1]);
    c.w = view(1, rhs_dims, rhs_spec, rhs_spec[1], rhs_spec[0]);
    c.y = view(0, lhs_dims, lhs_spec, lhs_spec[0], lhs_spec[1]);
    c.stride = lhs_dilation;
    c.dilation = rhs_dilation;
    for (std::size_t s = 0; s < spatial; ++s) {
      c.pad_low[s] = (c.w.dims[s + 2] - 1) * c.dilation[s] - padding_low[s];
      if (c.pad_low[s] < 0) return std::nullopt;  // windows wholly in the padding
    }
  }
  c.pad_high.resize(spatial);
  for (std::size_t s = 0; s < spatial; ++s) {
    std::int64_t& x = c.x.dims[s + 2];
    const std::int64_t reach = (c.y.dims[s + 2] - 1) * c.stride[s] +
                               (c.w.dims[s + 2] - 1) * c.dilation[s] + 1 - c.pad_low[s];
    if (reach <= 0) return std::nullopt;
    if (reach >= x) {
      c.pad_high[s] = reach - x;
    } else if (x - reach < c.stride[s]) {
      c.pad_high[s] = 0;  // the libraries' size rule rounds the last positions away
    } else {              // no window reaches x's last positions
      c.pad_high[s] = 0;
      x = reach;
      c.x_shrunk = true;
    }
  }
  return c;
}

std::vector<std::int64_t> conv_key(const LibraryConv& c) {
  Axes k{static_cast<std::int64_t>(c.pass), c.groups, c.flip_w, c.x_shrunk};
  for (const ConvTensor* t : {&c.x, &c.w, &c.y}) {
    k.push_back(t->operand);
    k.push_back(static_cast<std::int64_t>(t->dims.size()));
    k.insert(k.end(), t->dims.begin(), t->dims.end());
    k.insert(k.end(), t->strides.begin(), t->strides.end());
  }
  for (const Axes* v : {&c.stride, &c.dilation, &c.pad_low, &c.pad_high})
    k.insert(k.end(), v->begin(), v->end());
  return k;
}

}  // namespace flaxpp::backend_impl
