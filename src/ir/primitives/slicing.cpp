// Slicing primitives: slice, rev, pad, concatenate, dynamic_slice and dynamic_update_slice —
// shape rules and VJPs, each the transpose of another as in JAX (slice's is pad with zeros,
// rev's itself, pad's a
// crop and a strided slice, concatenate's one slice per operand, dynamic_slice's
// dynamic_update_slice into zeros, and dynamic_update_slice's that and a dynamic_slice).
#include <algorithm>
#include <limits>
#include <optional>

#include "rules.hpp"

namespace flaxpp::lax {
namespace {

using ir::VjpArgs;
using Axes = std::vector<std::int64_t>;

// Param `name`: one entry per axis of the operand `x`.
const Axes& per_axis(const std::string& prim, const ir::Params& p, const char* name,
                     const AVal& x) {
  const Axes& v = p.get<Axes>(name);
  if (static_cast<std::int64_t>(v.size()) != x.shape.rank())
    rules::fail(prim, detail::str(name, " needs one entry per axis of ", x, ", got ", v.size()));
  return v;
}

std::vector<PadConfig> pad_config(const ir::Params& p) {
  const Axes &low = p.get<Axes>("low"), &high = p.get<Axes>("high"),
             &interior = p.get<Axes>("interior");
  std::vector<PadConfig> config(low.size());
  for (std::size_t i = 0; i < low.size(); ++i)
    config[i] = {low[i], high[i], interior[i]};
  return config;
}

// The start operands of a dynamic slice of `x` from in[first]: one 0-d int32 per axis.
void check_starts(const std::string& prim, std::span<const AVal> in, std::size_t first,
                  const AVal& x) {
  if (in.size() - first != static_cast<std::size_t>(x.shape.rank()))
    rules::fail(prim,
                detail::str("needs one start index per axis of ", x, ", got ", in.size() - first));
  for (std::size_t i = first; i < in.size(); ++i)
    if (in[i] != AVal{Shape{}, DType::i32})
      rules::fail(prim, detail::str("start indices must be 0-d int32, got ",
                                    rules::avals_str(in.subspan(first))));
}

}  // namespace

const ir::Primitive slice_p(
    "slice",
    [](std::span<const AVal> in, const ir::Params& p) {
      rules::expect_arity("slice", in, 1);
      const AVal& x = in[0];
      const Axes &start = per_axis("slice", p, "start_indices", x),
                 &limit = per_axis("slice", p, "limit_indices", x);
      const Axes& strides = per_axis("slice", p, "strides", x);
      Axes dims(start.size());
      for (std::size_t i = 0; i < dims.size(); ++i) {
        const std::int64_t d = x.shape.dims()[i];
        if (start[i] < 0 || start[i] > limit[i] || limit[i] > d || strides[i] < 1)
          rules::fail("slice",
                      detail::str("axis ", i, " of ", x, ": start ", start[i], ", limit ", limit[i],
                                  " and stride ", strides[i],
                                  " must satisfy 0 <= start <= limit <= ", d, " and stride >= 1"));
        dims[i] = (limit[i] - start[i] + strides[i] - 1) / strides[i];
      }
      return std::vector<AVal>{{Shape(dims), x.dtype}};
    },
    [](const VjpArgs& a) {
      // JAX's _slice_transpose_rule: the cotangent padded back to the operand's shape, with
      // stride - 1 zeros between its elements.
      const Shape& x = a.inputs[0].shape();
      const Shape& t = a.cotangents[0].shape();
      const Axes& start = a.params.get<Axes>("start_indices");
      const Axes& strides = a.params.get<Axes>("strides");
      std::vector<PadConfig> config(start.size());
      for (std::size_t i = 0; i < config.size(); ++i) {
        const std::int64_t n = t.dims()[i];
        const std::int64_t end = start[i] + (n == 0 ? 0 : (n - 1) * strides[i] + 1);
        config[i] = {start[i], x.dims()[i] - end, n == 0 ? 0 : strides[i] - 1};
      }
      return std::vector<Array>{pad(a.cotangents[0], scalar(0, a.cotangents[0].dtype()), config)};
    });

const ir::Primitive rev_p(
    "rev",
    [](std::span<const AVal> in, const ir::Params& p) {
      rules::expect_arity("rev", in, 1);
      Axes dims = p.get<Axes>("dimensions");
      std::sort(dims.begin(), dims.end());
      for (std::size_t i = 0; i < dims.size(); ++i)
        if (dims[i] < 0 || dims[i] >= in[0].shape.rank() || (i > 0 && dims[i] == dims[i - 1]))
          rules::fail("rev", detail::str("dimensions must be distinct axes of ", in[0]));
      return std::vector<AVal>{in[0]};
    },
    [](const VjpArgs& a) {
      return std::vector<Array>{rev(a.cotangents[0], a.params.get<Axes>("dimensions"))};
    });

const ir::Primitive pad_p(
    "pad",
    [](std::span<const AVal> in, const ir::Params& p) {
      rules::expect_arity("pad", in, 2);
      const AVal &x = in[0], &value = in[1];
      if (value.shape.rank() != 0 || value.dtype != x.dtype)
        rules::fail("pad", detail::str("the padding value must be 0-d of the operand's dtype (", x,
                                       "), got ", value));
      const Axes &low = per_axis("pad", p, "low", x), &high = per_axis("pad", p, "high", x),
                 &interior = per_axis("pad", p, "interior", x);
      Axes dims(low.size());
      for (std::size_t i = 0; i < dims.size(); ++i) {
        const std::int64_t d = x.shape.dims()[i];
        if (interior[i] < 0)
          rules::fail("pad",
                      detail::str("axis ", i, ": interior padding ", interior[i], " must be >= 0"));
        // In double first: sizes past 2^62 are refused before their int64 sum could wrap.
        const double size = static_cast<double>(low[i]) + static_cast<double>(high[i]) +
                            static_cast<double>(d) +
                            static_cast<double>(std::max<std::int64_t>(d - 1, 0)) *
                                static_cast<double>(interior[i]);
        if (size > 0x1p62)
          rules::fail("pad", detail::str("axis ", i, " of ", x, " would have ", size,
                                         " elements; padding that large cannot be stored"));
        dims[i] = low[i] + high[i] + d + std::max<std::int64_t>(d - 1, 0) * interior[i];
        if (dims[i] < 0)
          rules::fail("pad",
                      detail::str("axis ", i, " of ", x, ": low ", low[i], " and high ", high[i],
                                  " crop more than its ",
                                  d + std::max<std::int64_t>(d - 1, 0) * interior[i], " elements"));
      }
      return std::vector<AVal>{{Shape(dims), x.dtype}};
    },
    [](const VjpArgs& a) {
      // JAX's _pad_transpose: crop the low and high padding (a pad by their negatives), then
      // take every (interior + 1)-th element; the padding value gets what is left.
      const Array& t = a.cotangents[0];
      const std::vector<PadConfig> config = pad_config(a.params);
      std::vector<PadConfig> crop(config.size());
      Axes start(config.size(), 0), strides(config.size());
      for (std::size_t i = 0; i < config.size(); ++i) {
        crop[i] = {-config[i].low, -config[i].high, 0};
        strides[i] = config[i].interior + 1;
      }
      const Array cropped = pad(t, scalar(0, t.dtype()), crop);
      const Array operand = slice(cropped, start, cropped.shape().dims(), strides);
      Axes all(static_cast<std::size_t>(t.rank()));
      for (std::size_t i = 0; i < all.size(); ++i)
        all[i] = static_cast<std::int64_t>(i);
      const Array value = sub(reduce_sum(t, all), reduce_sum(operand, all));
      return std::vector<Array>{operand, value};
    });

const ir::Primitive concatenate_p(
    "concatenate",
    [](std::span<const AVal> in, const ir::Params& p) {
      if (in.empty()) rules::fail("concatenate", "expected at least one operand");
      const std::int64_t dimension = p.get<std::int64_t>("dimension");
      const AVal& first = in[0];
      if (dimension < 0 || dimension >= first.shape.rank())
        rules::fail("concatenate", detail::str("dimension ", dimension, " is not an axis of ",
                                               first, " (0-d operands cannot be concatenated)"));
      // Every operand's dims with `dimension`'s set to 0 must equal the first's.
      const auto d = static_cast<std::size_t>(dimension);
      auto others = [&](const AVal& x) {
        Axes dims = x.shape.dims();
        dims[d] = 0;
        return dims;
      };
      Axes dims = others(first);
      for (const AVal& x : in)
        if (x.dtype != first.dtype || x.shape.rank() != first.shape.rank() || others(x) != dims)
          rules::fail("concatenate",
                      detail::str("operands must share their dtype and every axis but ", dimension,
                                  ", got ", rules::avals_str(in)));
      for (const AVal& x : in)
        dims[d] += x.shape.dims()[d];
      return std::vector<AVal>{{Shape(dims), first.dtype}};
    },
    [](const VjpArgs& a) {
      const Array& t = a.cotangents[0];
      const auto dimension = static_cast<std::size_t>(a.params.get<std::int64_t>("dimension"));
      std::vector<Array> cts;
      Axes start(static_cast<std::size_t>(t.rank()), 0), limit = t.shape().dims();
      for (const Array& x : a.inputs) {
        limit[dimension] = start[dimension] + x.shape().dims()[dimension];
        cts.push_back(slice(t, start, limit));
        start[dimension] = limit[dimension];
      }
      return cts;
    });

const ir::Primitive dynamic_slice_p(
    "dynamic_slice",
    [](std::span<const AVal> in, const ir::Params& p) {
      if (in.empty()) rules::fail("dynamic_slice", "expected an operand and its start indices");
      const AVal& x = in[0];
      check_starts("dynamic_slice", in, 1, x);
      const Axes& sizes = per_axis("dynamic_slice", p, "slice_sizes", x);
      for (std::size_t i = 0; i < sizes.size(); ++i)
        if (sizes[i] < 0 || sizes[i] > x.shape.dims()[i])
          rules::fail("dynamic_slice",
                      detail::str("slice size ", sizes[i], " of axis ", i, " must lie in [0, ",
                                  x.shape.dims()[i], "] for ", x));
      return std::vector<AVal>{{Shape(sizes), x.dtype}};
    },
    [](const VjpArgs& a) {
      const std::span<const Array> starts = a.inputs.subspan(1);
      std::vector<Array> cts(a.inputs.size());
      cts[0] = dynamic_update_slice(zeros_like(a.inputs[0]), a.cotangents[0], starts);
      return cts;
    });

const ir::Primitive dynamic_update_slice_p(
    "dynamic_update_slice",
    [](std::span<const AVal> in, const ir::Params&) {
      if (in.size() < 2)
        rules::fail("dynamic_update_slice", "expected an operand, an update and start indices");
      const AVal &x = in[0], &update = in[1];
      bool fits = update.dtype == x.dtype && update.shape.rank() == x.shape.rank();
      for (std::int64_t i = 0; fits && i < x.shape.rank(); ++i)
        fits = update.shape[i] <= x.shape[i];
      if (!fits)
        rules::fail("dynamic_update_slice",
                    detail::str("the update must have the operand's dtype and rank and fit "
                                "inside it, got operand ",
                                x, " and update ", update));
      check_starts("dynamic_update_slice", in, 2, x);
      return std::vector<AVal>{x};
    },
    [](const VjpArgs& a) {
      const Array& ct = a.cotangents[0];
      const Array& update = a.inputs[1];
      const std::span<const Array> starts = a.inputs.subspan(2);
      std::vector<Array> cts(a.inputs.size());
      cts[0] = dynamic_update_slice(ct, zeros_like(update), starts);
      cts[1] = dynamic_slice(ct, starts, update.shape().dims());
      return cts;
    });

namespace {

// Batching. Starts the same for every example: the batch axis is one more axis, sliced whole.
// Starts that differ: the block of each example is gathered from the batch seen as one flat
// array (take), and written back by scatter_add, as JAX's batching rules turn them into gather
// and scatter.

// For the operand `x` (the batch axis first), the flat position in it of each element of each
// example's block of `sizes` at `starts` (0-d, or 1-d where batched), placed as the shape rule
// says: int32 (size, sizes...).
Array flat_block_positions(const Array& x, std::span<const Array> starts,
                           const std::vector<bool>& batched, const Axes& sizes) {
  const std::int64_t size = x.shape()[0], rank = static_cast<std::int64_t>(sizes.size());
  if (x.shape().size() > std::numeric_limits<std::int32_t>::max())
    rules::fail("vmap of dynamic_slice/dynamic_update_slice",
                detail::str("a batch ", x.aval(),
                            " is past int32 positions; map over fewer "
                            "examples at once"));
  const Shape block(rules::prefixed(size, sizes));
  const auto i32 = [](std::int64_t v) { return scalar(static_cast<double>(v), DType::i32); };
  std::int64_t stride = x.shape().size() / size;
  Array at = mul(iota(DType::i32, block, 0), i32(stride));
  for (std::int64_t d = 0; d < rank; ++d) {
    const std::int64_t dim = x.shape()[d + 1];
    stride /= dim;
    Array start = starts[static_cast<std::size_t>(d)];
    start = select(lt(start, i32(0)), add(start, i32(dim)), start);
    start = max(min(start, i32(dim - sizes[static_cast<std::size_t>(d)])), i32(0));
    start = broadcast_in_dim(start, block, batched[static_cast<std::size_t>(d)] ? Axes{0} : Axes{});
    at = add(at, mul(add(start, iota(DType::i32, block, d + 1)), i32(stride)));
  }
  return at;
}

Array flattened(const Array& x) {
  return reshape(x, Shape({x.shape().size()}));
}

// The starts of an equation's operands from `first` on, for the batch.
struct BatchStarts {
  std::span<const Array> starts;
  std::vector<bool> batched;
  // When every example has the same starts: those of the whole batch (0 on the batch axis).
  std::optional<std::vector<Array>> shared;
};
BatchStarts batch_starts(const ir::BatchArgs& a, std::size_t first) {
  BatchStarts b{
      a.inputs.subspan(first),
      std::vector<bool>(a.batched.begin() + static_cast<std::ptrdiff_t>(first), a.batched.end()),
      std::nullopt};
  if (std::find(b.batched.begin(), b.batched.end(), true) == b.batched.end()) {
    b.shared = std::vector<Array>{scalar(0, DType::i32)};
    b.shared->insert(b.shared->end(), b.starts.begin(), b.starts.end());
  }
  return b;
}

ir::BatchedResults dynamic_slice_batched(const ir::BatchArgs& a) {
  const Axes& sizes = a.params.get<Axes>("slice_sizes");
  const Array x = ir::with_batch_axis(a.inputs[0], a.batched[0], a.size);
  const BatchStarts starts = batch_starts(a, 1);
  if (starts.shared)
    return {{dynamic_slice(x, *starts.shared, rules::prefixed(a.size, sizes))}, {true}};
  return {{take(flattened(x), flat_block_positions(x, starts.starts, starts.batched, sizes))},
          {true}};
}

ir::BatchedResults dynamic_update_slice_batched(const ir::BatchArgs& a) {
  const Array x = ir::with_batch_axis(a.inputs[0], a.batched[0], a.size);
  const Array update = ir::with_batch_axis(a.inputs[1], a.batched[1], a.size);
  const BatchStarts starts = batch_starts(a, 2);
  if (starts.shared) return {{dynamic_update_slice(x, update, *starts.shared)}, {true}};
  const Axes sizes(update.shape().dims().begin() + 1, update.shape().dims().end());
  const Array at = flat_block_positions(x, starts.starts, starts.batched, sizes);
  // scatter_add adds: each block element lands on -0.0 (which adds to anything exactly), and a
  // mask of the positions written picks it over x's element. Bools travel as int32.
  const bool boolean = x.dtype() == DType::bool_;
  const DType dtype = boolean ? DType::i32 : x.dtype();
  const Array flat = convert_element_type(flattened(x), dtype);
  const Array written = scatter_add(full_like(flat, -0.0), at, convert_element_type(update, dtype));
  const Array ones = full_like(at, 1);
  const Array mask = gt(scatter_add(zeros_like(convert_element_type(flat, DType::i32)), at, ones),
                        scalar(0, DType::i32));
  const Array out = convert_element_type(select(mask, written, flat), x.dtype());
  return {{reshape(out, x.shape())}, {true}};
}

// pad's value, when it differs between examples: x padded with anything, and the value put
// where no element of x landed.
ir::BatchedResults pad_batched(const ir::BatchArgs& a) {
  std::vector<PadConfig> config = pad_config(a.params);
  config.insert(config.begin(), PadConfig{});
  const Array x = ir::with_batch_axis(a.inputs[0], a.batched[0], a.size);
  const Array& value = a.inputs[1];
  if (!a.batched[1]) return {{pad(x, value, config)}, {true}};
  const Array padded = pad(x, scalar(0, x.dtype()), config);
  const Array from_x = ne(pad(full_like(x, 1), scalar(0, x.dtype()), config), scalar(0, x.dtype()));
  return {{select(from_x, padded, broadcast_in_dim(value, padded.shape(), {0}))}, {true}};
}

const bool slicing_batching_registered = [] {
  ir::register_batching(
      slice_p, rules::batch_every_operand([](const ir::BatchArgs& a) {
        ir::Params p = rules::with_param(a.params, "start_indices",
                                         rules::prefixed(0, a.params.get<Axes>("start_indices")));
        p.set("limit_indices", rules::prefixed(a.size, a.params.get<Axes>("limit_indices")));
        p.set("strides", rules::prefixed(1, a.params.get<Axes>("strides")));
        return p;
      }));
  ir::register_batching(rev_p, rules::batch_along_axes({"dimensions"}));
  ir::register_batching(concatenate_p, rules::batch_along_axes({"dimension"}));
  ir::register_batching(pad_p, pad_batched);
  ir::register_batching(dynamic_slice_p, dynamic_slice_batched);
  ir::register_batching(dynamic_update_slice_p, dynamic_update_slice_batched);
  return true;
}();

}  // namespace

Array slice(const Array& x, std::vector<std::int64_t> start_indices,
            std::vector<std::int64_t> limit_indices, std::vector<std::int64_t> strides) {
  // The equation always holds one stride per axis, so nothing downstream reads an empty list.
  if (strides.empty()) strides.assign(start_indices.size(), 1);
  const Array in[] = {x};
  return ir::bind1(slice_p, in,
                   {{"start_indices", std::move(start_indices)},
                    {"limit_indices", std::move(limit_indices)},
                    {"strides", std::move(strides)}});
}

Array rev(const Array& x, std::vector<std::int64_t> dimensions) {
  const Array in[] = {x};
  return ir::bind1(rev_p, in, {{"dimensions", std::move(dimensions)}});
}

Array pad(const Array& x, const Array& padding_value, std::span<const PadConfig> config) {
  Axes low, high, interior;
  for (const PadConfig& c : config) {
    low.push_back(c.low);
    high.push_back(c.high);
    interior.push_back(c.interior);
  }
  const Array in[] = {x, padding_value};
  return ir::bind1(
      pad_p, in,
      {{"low", std::move(low)}, {"high", std::move(high)}, {"interior", std::move(interior)}});
}

Array concatenate(std::span<const Array> operands, std::int64_t dimension) {
  return ir::bind1(concatenate_p, operands, {{"dimension", dimension}});
}

Array dynamic_slice(const Array& x, std::span<const Array> start_indices,
                    std::vector<std::int64_t> slice_sizes) {
  std::vector<Array> in{x};
  in.insert(in.end(), start_indices.begin(), start_indices.end());
  return ir::bind1(dynamic_slice_p, in, {{"slice_sizes", std::move(slice_sizes)}});
}

Array dynamic_update_slice(const Array& x, const Array& update,
                           std::span<const Array> start_indices) {
  std::vector<Array> in{x, update};
  in.insert(in.end(), start_indices.begin(), start_indices.end());
  return ir::bind1(dynamic_update_slice_p, in);
}

}  // namespace flaxpp::lax
