// Private to the ops layer (and its tests): XLA's attention arithmetic composed of primitives,
// the (B, N, T, S) logits materialised. dot_product_attention's implementation "xla" is built
// from it, and so are the fused attention primitives' evaluations on devices without a fused
// kernel of their own (CUDA), forward and backward.
#pragma once

#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax_attention.hpp"
#include "flaxpp/ir/params.hpp"

namespace flaxpp::attention_detail {

// key or value (B, S, K, H) with each head repeated for the N / K query heads that read it:
// (B, S, N, H).
Array repeat_heads(const Array& kv, std::int64_t heads);
// The padded float32 logits (B, N, T, S): (query . key_heads) * scale (+ bias) in query's
// dtype, where(allowed, logits, -0.7 * float32's max), as float32.
Array padded_logits(const Array& query, const Array& key_heads, const Array& bias,
                    const Array& mask, const lax::AttentionParams& params);
// weights (B, N, T, S) applied to values (B, S, N, H): einsum('BNTS,BSNH->BTNH').
Array apply_weights(const Array& weights, const Array& value_heads);

// The primitives' results from their operands and params (lax_attention.hpp), unfused:
// {out, lse} and {dquery, dkey, dvalue[, dbias]}.
std::vector<Array> unfused_forward(std::span<const Array> in, const ir::Params& params);
std::vector<Array> unfused_backward(std::span<const Array> in, const ir::Params& params);

}  // namespace flaxpp::attention_detail
