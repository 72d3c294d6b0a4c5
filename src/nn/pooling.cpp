// Flax's pool(): the window spans the spatial axes only (1 over batch and feature axes), as
// lax.reduce_window with add or max.
#include "flaxpp/nn/pooling.hpp"

#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/lax_windowed.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::nn {
namespace {

using Axes = std::vector<std::int64_t>;

template <class Reduce>
Array pool(const char* fn, const Array& x, const Axes& window_shape, const PoolOptions& o,
           Reduce reduce) {
  const std::size_t spatial = window_shape.size();
  if (spatial == 0 || (!o.strides.empty() && o.strides.size() != spatial))
    throw ValueError(detail::str(fn,
                                 ": expected a window of one or more axes and strides of "
                                 "its length, got ",
                                 window_shape.size(), " and ", o.strides.size()));
  if (x.rank() < static_cast<std::int64_t>(spatial) + 1)
    throw ValueError(detail::str(fn, ": a window of ", spatial, " axes needs an input of at least ",
                                 spatial + 1, " axes (spatial..., features), got ", x.aval()));
  const bool single = x.rank() == static_cast<std::int64_t>(spatial) + 1;
  const Array input = single ? expand_dims(x, 0) : x;
  const std::size_t batch_axes = static_cast<std::size_t>(input.rank()) - spatial - 1;
  Axes window(batch_axes, 1), strides(batch_axes, 1);
  window.insert(window.end(), window_shape.begin(), window_shape.end());
  window.push_back(1);
  const Axes spatial_strides = o.strides.empty() ? Axes(spatial, 1) : o.strides;
  strides.insert(strides.end(), spatial_strides.begin(), spatial_strides.end());
  strides.push_back(1);
  lax::Padding padding;
  if (std::holds_alternative<std::string>(o.padding)) {
    // lax.reduce_window resolves a padding string over every axis.
    padding = lax::resolve_padding(o.padding, input.shape().dims(), window, strides);
  } else {
    const lax::Padding& pairs = std::get<lax::Padding>(o.padding);
    if (pairs.size() != spatial)
      throw ValueError(detail::str(fn, ": expected one (low, high) padding pair per window axis (",
                                   spatial, "), got ", pairs.size()));
    padding = lax::Padding(batch_axes, {0, 0});
    padding.insert(padding.end(), pairs.begin(), pairs.end());
    padding.emplace_back(0, 0);
  }
  const Array y = reduce(input, lax::WindowOptions{.window_dimensions = window,
                                                   .window_strides = strides,
                                                   .padding = padding,
                                                   .base_dilation = {},
                                                   .window_dilation = {}});
  return single ? reshape(y, Axes(y.shape().dims().begin() + 1, y.shape().dims().end())) : y;
}

}  // namespace

Array max_pool(const Array& x, const Axes& window_shape, const PoolOptions& options) {
  return pool(
      "max_pool", x, window_shape, options,
      [](const Array& v, const lax::WindowOptions& w) { return lax::reduce_window_max(v, w); });
}

Array avg_pool(const Array& x, const Axes& window_shape, const PoolOptions& options) {
  const Array sums = pool(
      "avg_pool", x, window_shape, options,
      [](const Array& v, const lax::WindowOptions& w) { return lax::reduce_window_sum(v, w); });
  std::int64_t size = 1;
  for (const std::int64_t w : window_shape)
    size *= w;
  return sums / static_cast<double>(size);
}

}  // namespace flaxpp::nn
