// Index primitives: iota, take (rows of an array picked by integer indices: jnp.take(x, i,
// axis=0), which JAX writes as a gather) and scatter_add (its transpose: rows added back at
// those indices) — shape rules and VJPs, and the range check of indices every backend runs.
#include <algorithm>
#include <limits>

#include "rules.hpp"

namespace flaxpp::lax {
namespace {

using ir::VjpArgs;
using Axes = std::vector<std::int64_t>;

// x (N, rest...) with N >= 1, indices int32 (idx...): the result (idx..., rest...).
Shape taken_shape(const std::string& prim, const AVal& x, const AVal& indices) {
  if (x.shape.rank() == 0)
    rules::fail(prim, detail::str("the operand needs a leading axis to index, got ", x));
  if (indices.dtype != DType::i32)
    rules::fail(prim, detail::str("indices must be int32, got ", indices,
                                  "; convert them with convert_element_type"));
  Axes dims = indices.shape.dims();
  dims.insert(dims.end(), x.shape.dims().begin() + 1, x.shape.dims().end());
  return Shape(dims);
}

}  // namespace

const ir::Primitive iota_p("iota", [](std::span<const AVal> in, const ir::Params& p) {
  rules::expect_arity("iota", in, 0);
  const Shape shape(p.get<Axes>("shape"));
  const DType dtype = p.get<DType>("dtype");
  const std::int64_t dimension = p.get<std::int64_t>("dimension");
  if (dimension < 0 || dimension >= shape.rank())
    rules::fail("iota", detail::str("dimension ", dimension, " is not an axis of ", shape));
  if (dtype == DType::bool_) rules::fail("iota", "expected a numeric dtype, got bool");
  return std::vector<AVal>{{shape, dtype}};
});

const ir::Primitive take_p(
    "take",
    [](std::span<const AVal> in, const ir::Params&) {
      rules::expect_arity("take", in, 2);
      return std::vector<AVal>{{taken_shape("take", in[0], in[1]), in[0].dtype}};
    },
    [](const VjpArgs& a) {
      // The cotangent of each picked row goes back to its row, summed where rows repeat.
      const Array& x = a.inputs[0];
      return std::vector<Array>{scatter_add(zeros_like(x), a.inputs[1], a.cotangents[0]), Array()};
    });

const ir::Primitive scatter_add_p(
    "scatter_add",
    [](std::span<const AVal> in, const ir::Params&) {
      rules::expect_arity("scatter_add", in, 3);
      const AVal& x = in[0];
      if (x.dtype == DType::bool_)
        rules::fail("scatter_add", detail::str("expected a numeric operand, got ", x));
      const AVal want{taken_shape("scatter_add", x, in[1]), x.dtype};
      if (in[2] != want)
        rules::fail("scatter_add", detail::str("updates must be ", want, " for operand ", x,
                                               " and indices ", in[1], ", got ", in[2]));
      return std::vector<AVal>{x};
    },
    [](const VjpArgs& a) {
      const Array& ct = a.cotangents[0];
      return std::vector<Array>{ct, Array(), take(ct, a.inputs[1])};
    });

namespace {

// Batched indices `indices` (size, idx...) into rows (size, n, rest...) seen as one table of
// size * n rows: example b's index i picks row b * n + i. An index outside [0, n) becomes -1,
// so that the backends still refuse it (naming -1, not the index given).
Array rows_of_flat_table(const Array& indices, std::int64_t n, std::int64_t size) {
  if (size * n > std::numeric_limits<std::int32_t>::max())
    rules::fail("vmap of take/scatter_add",
                detail::str("a batch of ", size, " tables of ", n,
                            " rows is past int32 indices; map over fewer examples at once"));
  const Array first =
      mul(iota(DType::i32, indices.shape(), 0), scalar(static_cast<double>(n), DType::i32));
  const Array clamped =
      max(min(indices, scalar(static_cast<double>(n - 1), DType::i32)), scalar(0, DType::i32));
  return select(eq(indices, clamped), add(indices, first), full_like(indices, -1));
}

// (size, n, rest...) as (size * n, rest...), and back.
Array merge_batch_axis(const Array& x) {
  Axes dims(x.shape().dims().begin() + 1, x.shape().dims().end());
  dims[0] *= x.shape()[0];
  return reshape(x, Shape(dims));
}
Array split_batch_axis(const Array& x, std::int64_t size) {
  Axes dims = rules::prefixed(size, x.shape().dims());
  dims[1] /= size;
  return reshape(x, Shape(dims));
}

// Indices the same for every example: the rows' batch axis moves behind the row axis, where
// take keeps it (the backends check each index as given). Batched indices: one flat table.
ir::BatchedResults take_batched(const ir::BatchArgs& a) {
  const Array& x = a.inputs[0];
  const Array& indices = a.inputs[1];
  if (!a.batched[0]) return {{take(x, indices)}, {true}};
  if (!a.batched[1])
    return {{ir::move_axis(take(ir::move_axis(x, 0, 1), indices), indices.rank(), 0)}, {true}};
  return {{take(merge_batch_axis(x), rows_of_flat_table(indices, x.shape()[1], a.size))}, {true}};
}

ir::BatchedResults scatter_add_batched(const ir::BatchArgs& a) {
  const Array x = ir::with_batch_axis(a.inputs[0], a.batched[0], a.size);
  const Array updates = ir::with_batch_axis(a.inputs[2], a.batched[2], a.size);
  const Array& indices = a.inputs[1];
  if (!a.batched[1]) {
    const Array sum =
        scatter_add(ir::move_axis(x, 0, 1), indices, ir::move_axis(updates, 0, indices.rank()));
    return {{ir::move_axis(sum, 1, 0)}, {true}};
  }
  const Array sum =
      scatter_add(merge_batch_axis(x), rows_of_flat_table(indices, x.shape()[1], a.size), updates);
  return {{split_batch_axis(sum, a.size)}, {true}};
}

const bool indexing_batching_registered = [] {
  ir::register_batching(take_p, take_batched);
  ir::register_batching(scatter_add_p, scatter_add_batched);
  return true;
}();

}  // namespace

Array iota(DType dtype, const Shape& shape, std::int64_t dimension) {
  return ir::bind1(iota_p, {},
                   {{"dtype", dtype}, {"shape", shape.dims()}, {"dimension", dimension}});
}

Array take(const Array& x, const Array& indices) {
  const Array in[] = {x, indices};
  return ir::bind1(take_p, in);
}

Array scatter_add(const Array& x, const Array& indices, const Array& updates) {
  const Array in[] = {x, indices, updates};
  return ir::bind1(scatter_add_p, in);
}

std::vector<std::int32_t> checked_indices(const Array& indices, std::int64_t size,
                                          const std::string& what) {
  FLAXPP_ASSERT(indices.dtype() == DType::i32 && !indices.is_traced(), what,
                ": checked_indices needs concrete int32 indices, got ", indices.aval());
  std::vector<std::int32_t> v = indices.to_vector<std::int32_t>();
  const auto bad =
      std::find_if(v.begin(), v.end(), [&](std::int32_t i) { return i < 0 || i >= size; });
  if (bad == v.end()) return v;
  throw index_outside_error(what, *bad, bad - v.begin(),
                            detail::str("the indices ", indices.aval()), size);
}

ValueError index_outside_error(const std::string& what, std::int64_t index, std::int64_t position,
                               const std::string& indices, std::int64_t size) {
  return ValueError(detail::str(
      what, ": index ", index, " (element ", position, " of ", indices, ") is outside [0, ", size,
      "); every index must pick an existing row. (JAX would give "
      "NaN rows for indices past the end and wrap negative ones; flaxpp refuses both: check "
      "the ids against the table size)"));
}

}  // namespace flaxpp::lax
