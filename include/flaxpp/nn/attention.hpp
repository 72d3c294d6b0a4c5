// flaxpp/nn/attention.hpp — Flax's attention functions (flax/linen/attention.py):
// dot_product_attention_weights and dot_product_attention with Flax's arithmetic, and the
// masks make_attention_mask and make_causal_mask. Shapes: query (batch..., q_length, heads,
// depth), key and value (batch..., kv_length, heads, depth); weights (batch..., heads,
// q_length, kv_length).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>

#include "flaxpp/core/array.hpp"
#include "flaxpp/random/key.hpp"

namespace flaxpp::nn {

// Flax's keyword arguments of dot_product_attention(_weights). An invalid (default) Array is
// Python's None.
struct AttentionOptions {
  Array bias{};  // added to the weights; broadcastable to (batch..., heads, q_length, kv_length)
  Array mask{};  // the same shape rule; weights where it is 0 (false) get dtype's lowest value
  bool broadcast_dropout = true;  // one dropout mask shared by the batch and head axes
  std::optional<random::Key> dropout_rng{};
  double dropout_rate = 0.0;
  bool deterministic = false;
  std::optional<DType> dtype{};  // computation dtype; none: the inputs' common dtype
  bool force_fp32_for_softmax = false;
};

// softmax(query / sqrt(depth) . key (+ bias, masked)) with dropout, as Flax computes it: the
// scores are dot_general(query, key) with (batch..., heads) as batch dimensions, the masked
// scores jnp.where(mask, scores, finfo(dtype).min), the softmax in the computation dtype
// (float32 with force_fp32_for_softmax), dropout multiplying by keep / keep_prob with keep =
// bernoulli(dropout_rng, 1 - rate, (1, ..., q_length, kv_length)) under broadcast_dropout.
// Bad shapes (ranks, batch, heads, depths, a mask or bias that does not broadcast to the
// weights) are ValueErrors naming both shapes.
Array dot_product_attention_weights(const Array& query, const Array& key,
                                    const AttentionOptions& options = {});
// The weights applied to value: (batch..., q_length, heads, depth). As jnp.einsum computes
// '...hqk,...khd->...qhd': dot_general(value, weights) giving (batch..., heads, depth,
// q_length), transposed to (batch..., q_length, heads, depth).
Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const AttentionOptions& options = {});

// What nn::MultiHeadDotProductAttention calls to attend (Flax's attention_fn): query, key,
// value (batch..., length, heads, depth) and Flax's keyword arguments. Empty: Flax's own
// dot_product_attention above.
using AttentionFn = std::function<Array(const Array& query, const Array& key, const Array& value,
                                        const AttentionOptions& options)>;
// An attention_fn running jax.nn.dot_product_attention (flaxpp/ops/dot_product_attention.hpp)
// with `implementation` (none: flaxpp's fused attention; "xla"): the same softmax(query . key /
// sqrt(depth), masked) . value as Flax's arithmetic, the query scaled after the product
// instead of before and masked logits -0.7 * float32's max instead of the dtype's lowest, so
// values agree to rounding. Takes one batch axis; a Flax mask (any dtype, nonzero: attend) and
// bias of rank 4; no dropout (a ValueError where dropout would apply); `dtype` converts the
// inputs first, the softmax is float32 either way.
AttentionFn jax_attention_fn(std::optional<std::string> implementation = std::nullopt);
// By name, as a train config's model.attention says: "flax" (empty: Flax's arithmetic), "fused"
// (jax_attention_fn()) or "xla" (jax_attention_fn("xla")); a ValueError for another name.
AttentionFn attention_fn_named(const std::string& name);

// make_attention_mask(query_input (batch..., q_len), key_input (batch..., kv_len)):
// pairwise_fn(query_input[..., :, None], key_input[..., None, :]) with a heads axis of size 1
// inserted before the last two axes and `extra_batch_dims` leading axes of size 1, as `dtype`:
// (1..., batch..., 1, q_len, kv_len). pairwise_fn defaults to jnp.multiply.
using PairwiseFn = std::function<Array(const Array&, const Array&)>;
Array make_attention_mask(const Array& query_input, const Array& key_input,
                          const PairwiseFn& pairwise_fn = {}, std::int64_t extra_batch_dims = 0,
                          DType dtype = DType::f32);
// make_causal_mask(x (batch..., len)): position i attends to positions j <= i, (1...,
// batch..., 1, len, len); only x's shape is read. Built from iota, so that inside a checkpoint
// the mask is recomputed as JAX recomputes it, never saved.
Array make_causal_mask(const Array& x, std::int64_t extra_batch_dims = 0, DType dtype = DType::f32);
// combine_masks(masks..., dtype): the logical and of the given masks (invalid Arrays, Python's
// None, are skipped), broadcast together, as `dtype`; an invalid Array when none is given.
Array combine_masks(std::span<const Array> masks, DType dtype = DType::f32);

}  // namespace flaxpp::nn
