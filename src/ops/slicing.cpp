// jax.numpy's static slicing and joining (flaxpp/ops/slicing.hpp).
#include "flaxpp/ops/slicing.hpp"

#include <algorithm>
#include <tuple>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp {
namespace {

using Axes = std::vector<std::int64_t>;

// The [start, stop) of a Range with a positive step along an axis of n elements, as Python's
// slice.indices(n) clamps them.
std::pair<std::int64_t, std::int64_t> forward_bounds(const Range& r, std::int64_t n) {
  auto clamp = [n](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + n : i, 0, n); };
  const std::int64_t start = r.start ? clamp(*r.start) : 0;
  const std::int64_t stop = r.stop ? clamp(*r.stop) : n;
  return {start, std::max(start, stop)};
}

// A Range with a negative step as the same elements of the reversed axis (element i of the axis
// is element n - 1 - i of its reversal) with a positive step.
Range reversed(const Range& r, std::int64_t n) {
  // slice.indices(n) for a negative step: start and stop in [-1, n - 1], start defaulting to
  // the last element and stop to "before the first".
  auto clamp = [n](std::int64_t i) {
    return std::clamp<std::int64_t>(i < 0 ? i + n : i, -1, n - 1);
  };
  const std::int64_t start = r.start ? clamp(*r.start) : n - 1;
  const std::int64_t stop = r.stop ? clamp(*r.stop) : -1;
  return Range{n - 1 - start, n - 1 - stop, -r.step};
}

}  // namespace

Array slice(const Array& x, std::span<const Range> ranges) {
  if (static_cast<std::int64_t>(ranges.size()) > x.rank())
    throw ValueError(detail::str("slice: ", ranges.size(), " ranges for ", x.aval(), " of rank ",
                                 x.rank(), "; give at most one per axis"));
  const std::size_t rank = static_cast<std::size_t>(x.rank());
  Axes start(rank, 0), limit = x.shape().dims(), strides(rank, 1);
  Axes flipped;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    Range r = ranges[i];
    if (r.step == 0)
      throw ValueError(detail::str("slice: axis ", i, " of ", x.aval(), " has step 0"));
    if (r.step < 0) {
      r = reversed(r, limit[i]);
      flipped.push_back(static_cast<std::int64_t>(i));
    }
    std::tie(start[i], limit[i]) = forward_bounds(r, limit[i]);
    strides[i] = r.step;
  }
  const Array y = flipped.empty() ? x : lax::rev(x, flipped);
  return lax::slice(y, start, limit, strides);
}

Array slice(const Array& x, std::initializer_list<Range> ranges) {
  return slice(x, std::span<const Range>(ranges.begin(), ranges.size()));
}

Array concatenate(std::span<const Array> arrays, std::int64_t axis) {
  if (arrays.empty()) throw ValueError("concatenate: needs at least one array");
  if (arrays.size() == 1) return arrays[0];
  return lax::concatenate(arrays,
                          static_cast<std::int64_t>(arrays[0].shape().normalize_axis(axis)));
}

Array stack(std::span<const Array> arrays, std::int64_t axis) {
  if (arrays.empty()) throw ValueError("stack: needs at least one array");
  for (const Array& a : arrays)
    if (a.aval() != arrays[0].aval())
      throw ValueError(detail::str("stack: every array must have one shape and dtype; got ",
                                   arrays[0].aval(), " and ", a.aval()));
  std::vector<Array> expanded;
  for (const Array& a : arrays)
    expanded.push_back(expand_dims(a, axis));
  return concatenate(expanded, axis);
}

Array pad(const Array& x, std::span<const std::pair<std::int64_t, std::int64_t>> pad_width,
          double value) {
  if (static_cast<std::int64_t>(pad_width.size()) != x.rank())
    throw ValueError(detail::str("pad: ", pad_width.size(), " (before, after) pairs for ", x.aval(),
                                 "; give one per axis"));
  std::vector<lax::PadConfig> config;
  for (const auto& [before, after] : pad_width) {
    if (before < 0 || after < 0)
      throw ValueError(
          detail::str("pad: widths must be >= 0, got (", before, ", ", after, ") for ", x.aval()));
    config.push_back({before, after, 0});
  }
  return lax::pad(x, lax::scalar(value, x.dtype()), config);
}

}  // namespace flaxpp
