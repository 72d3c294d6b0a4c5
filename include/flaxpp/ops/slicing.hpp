// flaxpp/ops/slicing.hpp — jax.numpy's static slicing and joining: x[a:b:c, ...] as slice(x,
// {...}), concatenate, stack and pad (constant mode). Built from lax's slice, concatenate and
// pad, so they run eagerly and traced alike, and differentiate.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "flaxpp/core/array.hpp"

namespace flaxpp {

// One axis of x[...]: Python's start:stop:step. start and stop may be absent (the whole axis)
// or negative (counted from the end), and are clamped to the axis as Python clamps them; step
// is nonzero (negative: backwards, as the axis reversed by lax.rev and sliced forwards).
struct Range {
  std::optional<std::int64_t> start, stop;
  std::int64_t step = 1;
};
// x[r_0, r_1, ...]: axes past the list are whole. x[:, :T] is slice(x, {{}, {0, T}}), x[1:]
// slice(x, {{1, {}}}), x[::-1] slice(x, {{{}, {}, -1}}).
Array slice(const Array& x, std::span<const Range> ranges);
Array slice(const Array& x, std::initializer_list<Range> ranges);

// jnp.concatenate: arrays of one dtype and rank, equal but along `axis` (negative counts from
// the end).
Array concatenate(std::span<const Array> arrays, std::int64_t axis = 0);
// jnp.stack: arrays of one aval along a new axis `axis` of the result.
Array stack(std::span<const Array> arrays, std::int64_t axis = 0);
// jnp.pad(x, pad_width, constant_values=value): (before, after) per axis, both >= 0.
Array pad(const Array& x, std::span<const std::pair<std::int64_t, std::int64_t>> pad_width,
          double value = 0.0);

}  // namespace flaxpp
