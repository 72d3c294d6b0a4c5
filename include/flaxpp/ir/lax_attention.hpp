// flaxpp/ir/lax_attention.hpp — flaxpp's fused attention primitive (not in jax.lax):
// jax.nn.dot_product_attention's XLA arithmetic as one primitive, so that a backend runs it
// without materialising the scores (flaxpp/ops/dot_product_attention.hpp is the function users
// call; it also composes the same arithmetic from primitives, implementation "xla").
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::lax {

// dot_product_attention(query, key, value[, bias][, mask]): query (B, T, N, H), key and value
// (B, S, K, H) with N a multiple of K (query head n reads key/value head n / (N / K)), all of
// one floating dtype; bias (query's dtype) and mask (bool), where params "bias" and "mask"
// (bools) say they are given, of rank 4 and broadcastable to (B, N, T, S). Params "scale"
// (double) and "is_causal" (bool). Results: the output (B, T, N, H) in query's dtype, and the
// logsumexp of each row of the padded float32 logits, (B, N, T) float32 (FlashAttention-2's L,
// which the backward pass reads).
//
// The arithmetic is XLA's (jax.nn.dot_product_attention, implementation "xla"): logits =
// (query . key) * scale (+ bias) in query's dtype; positions the mask or is_causal (key
// position after query position) rule out take attention_mask_value(); softmax in float32;
// the weights, in value's dtype, applied to value. A backend evaluates it a tile of scores at a
// time (online softmax), so its sums run in another order than the composed arithmetic's.
// Its VJP is dot_product_attention_bwd.
extern const ir::Primitive dot_product_attention_p;
// dot_product_attention_bwd(query, key, value[, bias][, mask], out, lse, dout): the forward's
// operands and params, its two results and the output's cotangent. Results: the cotangents of
// query, key, value and, with a bias, of the bias (its own shape: summed over the axes it is
// broadcast along). No VJP.
extern const ir::Primitive dot_product_attention_bwd_p;

struct AttentionParams {
  double scale = 1.0;
  bool is_causal = false;
};

// The value masked logits take: jax.nn's -0.7 * float32's max (finite, so that a row masked
// everywhere averages the values rather than giving NaN).
inline constexpr float kAttentionMaskValue = -0.7f * 3.40282347e38f;

// Binds dot_product_attention; an invalid bias or mask is none. Results {out, lse}.
std::vector<Array> fused_attention(const Array& query, const Array& key, const Array& value,
                                   const Array& bias, const Array& mask,
                                   const AttentionParams& params);

// The sizes of one equation of either primitive, from its operands' avals and params, for
// the kernels: bias and mask strides over (B, N, T, S) are 0 along their broadcast axes (all
// 0 where absent).
struct AttentionDims {
  std::int64_t batch = 0, q_len = 0, kv_len = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool has_bias = false, has_mask = false;
  std::array<std::int64_t, 4> bias_strides{}, mask_strides{};
  AttentionParams params{};
  // Operand positions: query 0, key 1, value 2, then bias and mask where present.
  std::size_t bias_index() const { return 3; }
  std::size_t mask_index() const { return has_bias ? 4 : 3; }
  std::size_t num_forward_operands() const {
    return 3 + static_cast<std::size_t>(has_bias) + static_cast<std::size_t>(has_mask);
  }
};
AttentionDims attention_dims(std::span<const AVal> operands, const ir::Params& params);
// The same for concrete or traced operands (their avals).
AttentionDims attention_dims(std::span<const Array> operands, const ir::Params& params);

// A device's fused kernel for either primitive (cuDNN's flash attention on CUDA), where it
// takes the operands given: its results, or none (an empty vector) for the device's own
// evaluation of the arithmetic to run instead. The backends register theirs as the program
// starts; nullptr where a device kind has none.
using AttentionKernel = ir::Evaluator;
void register_attention_kernel(DeviceKind kind, AttentionKernel kernel);
AttentionKernel attention_kernel(DeviceKind kind);

}  // namespace flaxpp::lax
