// Flax's attention functions (flax/linen/attention.py), step for step as their jaxprs show
// them, so that values, gradients and what a checkpoint policy saves are JAX's.
#include "flaxpp/nn/attention.hpp"

#include <cmath>
#include <limits>
#include <numeric>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/dot_product_attention.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "nn/dropout_mask.hpp"

namespace flaxpp::nn {
namespace {

using Axes = std::vector<std::int64_t>;

// jnp.finfo(dtype).min.
double lowest(DType dtype) {
  switch (dtype) {
    case DType::f64:
      return std::numeric_limits<double>::lowest();
    case DType::bf16:
      return -3.3895313892515355e+38;
    case DType::f16:
      return -65504.0;
    default:
      return std::numeric_limits<float>::lowest();
  }
}

Axes iota_axes(std::int64_t begin, std::int64_t end) {
  Axes out(static_cast<std::size_t>(end - begin));
  std::iota(out.begin(), out.end(), begin);
  return out;
}

[[noreturn]] void fail(const char* fn, const std::string& message) {
  throw ValueError(detail::str(fn, ": ", message));
}

// The common computation dtype of `arrays` (Flax's promote_dtype): `dtype` when given, else
// theirs when they agree, else float32.
DType promoted(std::initializer_list<const Array*> arrays, const std::optional<DType>& dtype) {
  if (dtype) return *dtype;
  const DType first = (*arrays.begin())->dtype();
  for (const Array* a : arrays)
    if (a->dtype() != first) return DType::f32;
  return first;
}

// query and key (batch..., length, heads, depth) agree as Flax asserts.
void check_query_key(const char* fn, const Array& q, const Array& k) {
  if (q.rank() < 3 || q.rank() != k.rank())
    fail(fn, detail::str("query and key must have one rank >= 3 (batch..., length, heads, depth), "
                         "got query ",
                         q.aval(), " and key ", k.aval()));
  const auto& qd = q.shape().dims();
  const auto& kd = k.shape().dims();
  const std::size_t r = qd.size();
  if (!std::equal(qd.begin(), qd.end() - 3, kd.begin()))
    fail(fn, detail::str("query and key batch dims must match, got ", q.aval(), " and ", k.aval()));
  if (qd[r - 2] != kd[r - 2] || qd[r - 1] != kd[r - 1])
    fail(fn, detail::str("query and key must have the same heads and depth, got ", q.aval(),
                         " and ", k.aval()));
}

// x must broadcast to the weights' shape without enlarging it.
void check_broadcasts(const char* what, const Array& x, const Shape& weights) {
  bool ok = x.rank() <= weights.rank();
  for (std::int64_t i = 1; ok && i <= x.rank(); ++i)
    ok = x.shape()[-i] == 1 || x.shape()[-i] == weights[-i];
  if (!ok)
    fail("dot_product_attention",
         detail::str("the ", what, " ", x.aval(),
                     " does not broadcast to the attention weights (batch..., heads, q_length, "
                     "kv_length) = ",
                     weights,
                     "; give it those axes, or size 1 in their place (make_causal_mask and "
                     "make_attention_mask of the query and key inputs build masks that way)"));
}

}  // namespace

Array dot_product_attention_weights(const Array& query, const Array& key,
                                    const AttentionOptions& o) {
  check_query_key("dot_product_attention_weights", query, key);
  const DType dtype = promoted({&query, &key}, o.dtype);
  const std::int64_t r = query.rank(), nb = r - 3;
  const std::int64_t depth = query.shape()[-1];
  // query / jnp.sqrt(depth).astype(dtype): the square root in float32.
  const Array q = astype(query, dtype) /
                  lax::scalar(static_cast<double>(std::sqrt(static_cast<float>(depth))), dtype);
  // einsum('...qhd,...khd->...hqk'): batch (batch..., heads), contracting depth.
  Axes batch = iota_axes(0, nb);
  batch.push_back(r - 2);
  Array w = lax::dot_general(q, astype(key, dtype), {{r - 1}, {r - 1}, batch, batch});
  if (o.bias.valid()) {
    check_broadcasts("bias", o.bias, w.shape());
    w = w + astype(o.bias, dtype);
  }
  if (o.mask.valid()) {
    check_broadcasts("mask", o.mask, w.shape());
    // jnp.where(mask, w, big_neg) reads the mask as mask != 0.
    const Array keep =
        o.mask.dtype() == DType::bool_ ? o.mask : lax::ne(o.mask, lax::scalar(0.0, o.mask.dtype()));
    w = where(keep, w, lax::scalar(lowest(dtype), dtype));
  }
  w = o.force_fp32_for_softmax && dtype != DType::f32 ? softmax(astype(w, DType::f32))
                                                      : astype(softmax(w), dtype);
  if (!(o.dropout_rate >= 0.0 && o.dropout_rate <= 1.0))
    fail("dot_product_attention_weights",
         detail::str("dropout_rate must be in [0, 1], got ", o.dropout_rate));
  if (!o.deterministic && o.dropout_rate > 0.0) {
    if (!o.dropout_rng)
      fail("dot_product_attention_weights",
           detail::str("dropout_rate ", o.dropout_rate,
                       " with deterministic false needs a dropout_rng key"));
    const double keep_prob = 1.0 - o.dropout_rate;
    std::vector<std::int64_t> mask_dims = w.shape().dims();
    if (o.broadcast_dropout)  // one mask for the batch and head axes
      std::fill(mask_dims.begin(), mask_dims.end() - 2, 1);
    const Array keep = keep_mask(*o.dropout_rng, keep_prob, Shape(mask_dims), w);
    w = w * (astype(keep, w.dtype()) / keep_prob);
  }
  return w;
}

Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const AttentionOptions& o) {
  check_query_key("dot_product_attention", query, key);
  const auto& kd = key.shape().dims();
  if (value.rank() != key.rank() ||
      !std::equal(kd.begin(), kd.end() - 1, value.shape().dims().begin()))
    fail("dot_product_attention",
         detail::str("value must match key in batch dims, length and heads, got key ", key.aval(),
                     " and value ", value.aval()));
  AttentionOptions inner = o;
  inner.dtype = promoted({&query, &key, &value}, o.dtype);
  const Array w = dot_product_attention_weights(query, key, inner);
  // einsum('...hqk,...khd->...qhd') as jnp.einsum orders it: value is the left operand,
  // giving (batch..., heads, depth, q_length), then transposed.
  const std::int64_t r = value.rank(), nb = r - 3;
  Axes vb = iota_axes(0, nb), wb = iota_axes(0, nb);
  vb.push_back(nb + 1);
  wb.push_back(nb);
  const Array out = lax::dot_general(astype(value, w.dtype()), w, {{nb}, {nb + 2}, vb, wb});
  Axes perm = iota_axes(0, nb);
  perm.insert(perm.end(), {nb + 2, nb, nb + 1});
  return lax::transpose(out, perm);
}

Array make_attention_mask(const Array& query_input, const Array& key_input,
                          const PairwiseFn& pairwise_fn, std::int64_t extra_batch_dims,
                          DType dtype) {
  if (extra_batch_dims < 0)
    throw ValueError(
        detail::str("make_attention_mask: extra_batch_dims must be >= 0, got ", extra_batch_dims));
  const Array q = expand_dims(query_input, -1), k = expand_dims(key_input, -2);
  Array mask = pairwise_fn ? pairwise_fn(q, k) : multiply(q, k);
  mask = expand_dims(mask, -3);
  for (std::int64_t i = 0; i < extra_batch_dims; ++i)
    mask = expand_dims(mask, 0);
  return astype(mask, dtype);
}

Array make_causal_mask(const Array& x, std::int64_t extra_batch_dims, DType dtype) {
  if (x.rank() == 0)
    throw ValueError(detail::str("make_causal_mask: x must be (batch..., length), got ", x.aval()));
  // jnp.broadcast_to(jnp.arange(length, dtype=int32), x.shape)
  const Array idxs = broadcast_to(lax::iota(DType::i32, Shape{x.shape()[-1]}), x.shape());
  return make_attention_mask(idxs, idxs, greater_equal, extra_batch_dims, dtype);
}

AttentionFn jax_attention_fn(std::optional<std::string> implementation) {
  return [implementation](const Array& query, const Array& key, const Array& value,
                          const AttentionOptions& options) {
    const auto fail = [](const std::string& message) {
      throw ValueError("jax_attention_fn: " + message);
    };
    if (query.rank() != 4)
      fail(detail::str("takes one batch axis, query (batch, length, heads, depth); got ",
                       query.aval(), " (reshape the batch axes into one)"));
    if (options.dropout_rate > 0.0 && !options.deterministic)
      fail(detail::str("jax.nn.dot_product_attention has no dropout, but dropout_rate is ",
                       options.dropout_rate, " and deterministic is false; use Flax's ",
                       "attention (an empty attention_fn) or drop the dropout"));
    const auto cast = [&](const Array& x) { return options.dtype ? astype(x, *options.dtype) : x; };
    DotProductAttentionOptions jax{.bias = options.bias, .implementation = implementation};
    if (options.mask.valid()) jax.mask = astype(options.mask, DType::bool_);
    return flaxpp::dot_product_attention(cast(query), cast(key), cast(value), jax);
  };
}

AttentionFn attention_fn_named(const std::string& name) {
  if (name == "flax") return {};
  if (name == "fused") return jax_attention_fn();
  if (name == "xla") return jax_attention_fn("xla");
  throw ValueError(detail::str("attention \"", name,
                               "\": expected flax (Flax's arithmetic), fused or xla "
                               "(jax.nn.dot_product_attention's)"));
}

Array combine_masks(std::span<const Array> masks, DType dtype) {
  Array combined;
  for (const Array& m : masks) {
    if (!m.valid()) continue;
    const Array b = astype(m, DType::bool_);
    // jnp.logical_and(combined, b): where combined holds, b; elsewhere false (combined).
    combined = combined.valid() ? where(combined, b, combined) : b;
  }
  return combined.valid() ? astype(combined, dtype) : combined;
}

}  // namespace flaxpp::nn
