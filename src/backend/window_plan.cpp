#include "backend/window_plan.hpp"

#include "backend/layout_plan.hpp"

namespace flaxpp::backend_impl {
namespace {

using Axes = std::vector<std::int64_t>;

std::int64_t at(const Axes& values, std::int64_t i) {
  return values[static_cast<std::size_t>(i)];
}

}  // namespace

kernels::ConvGeometry conv_geometry(const Axes& lhs_dims, const Axes& rhs_dims,
                                    const Axes& out_dims, const ir::Params& params) {
  const Axes &lhs_spec = params.get<Axes>("lhs_spec"), &rhs_spec = params.get<Axes>("rhs_spec"),
             &out_spec = params.get<Axes>("out_spec");
  const Axes lhs_strides = row_major_strides(lhs_dims), rhs_strides = row_major_strides(rhs_dims),
             out_strides = row_major_strides(out_dims);
  const std::int64_t groups = params.get<std::int64_t>("feature_group_count");
  const std::int64_t batch_groups = params.get<std::int64_t>("batch_group_count");
  kernels::ConvGeometry g;
  g.spatial = static_cast<int>(lhs_dims.size()) - 2;
  g.out_batch = at(out_dims, out_spec[0]);
  g.out_features = at(out_dims, out_spec[1]);
  g.in_features = at(rhs_dims, rhs_spec[1]);
  g.out_per_group = g.out_features / (groups * batch_groups);
  g.batch_grouped = batch_groups > 1;
  g.lhs_batch_stride = at(lhs_strides, lhs_spec[0]);
  g.lhs_feature_stride = at(lhs_strides, lhs_spec[1]);
  g.rhs_out_stride = at(rhs_strides, rhs_spec[0]);
  g.rhs_in_stride = at(rhs_strides, rhs_spec[1]);
  g.out_batch_stride = at(out_strides, out_spec[0]);
  g.out_feature_stride = at(out_strides, out_spec[1]);
  for (int s = 0; s < g.spatial; ++s) {
    const auto i = static_cast<std::size_t>(s);
    g.lhs_size[s] = at(lhs_dims, lhs_spec[i + 2]);
    g.lhs_stride[s] = at(lhs_strides, lhs_spec[i + 2]);
    g.window[s] = at(rhs_dims, rhs_spec[i + 2]);
    g.rhs_stride[s] = at(rhs_strides, rhs_spec[i + 2]);
    g.out_size[s] = at(out_dims, out_spec[i + 2]);
    g.out_stride[s] = at(out_strides, out_spec[i + 2]);
    g.window_stride[s] = params.get<Axes>("window_strides")[i];
    g.pad_low[s] = params.get<Axes>("padding_low")[i];
    g.lhs_dilation[s] = params.get<Axes>("lhs_dilation")[i];
    g.rhs_dilation[s] = params.get<Axes>("rhs_dilation")[i];
  }
  g.count = 1;
  for (const std::int64_t d : out_dims)
    g.count *= d;
  return g;
}

kernels::WindowGeometry window_geometry(const Axes& in_dims, const Axes& out_dims,
                                        const ir::Params& params) {
  kernels::WindowGeometry g;
  g.rank = static_cast<int>(in_dims.size());
  const bool dilated = params.has("base_dilation");
  for (int a = 0; a < g.rank; ++a) {
    const auto i = static_cast<std::size_t>(a);
    g.in_size[a] = in_dims[i];
    g.out_size[a] = out_dims[i];
    g.window[a] = params.get<Axes>("window_dimensions")[i];
    g.stride[a] = params.get<Axes>("window_strides")[i];
    g.pad_low[a] = params.get<Axes>("padding_low")[i];
    g.base_dilation[a] = dilated ? params.get<Axes>("base_dilation")[i] : 1;
    g.window_dilation[a] = dilated ? params.get<Axes>("window_dilation")[i] : 1;
  }
  return g;
}

}  // namespace flaxpp::backend_impl
