// flaxpp/nn/transformer_block.hpp — the pre-LayerNorm GPT block of the reference problems
// (shared/docs/refs-format.md, "Transformers"), Flax class name "Block", so that remat<...> of
// it is CheckpointBlock as in Flax:
//   x + MultiHeadDotProductAttention(num_heads)(LayerNorm()(x), mask=make_causal_mask(...)),
//   then x + Dense(D)(gelu(Dense(mlp_dim)(LayerNorm()(x)))).
// Children LayerNorm_0, MultiHeadDotProductAttention_0, LayerNorm_1, Dense_0, Dense_1.
#pragma once

#include "flaxpp/nn/attention.hpp"
#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn {

struct TransformerBlock {
  static constexpr const char* name = "Block";
  std::int64_t num_heads = 0;
  std::int64_t mlp_dim = 0;
  // The attention's autoregressive cache (MultiHeadDotProductAttention::decode); decoding one
  // position, no causal mask (the cache masks the positions).
  bool decode = false;
  AttentionFn attention_fn{};  // the attention's (empty: Flax's arithmetic)

  // x (B, T, D) -> (B, T, D), causal self-attention. (Flax's Block returns (x, None) for
  // nn.scan; this returns x.)
  Array operator()(Scope& s, const Array& x) const;
};

}  // namespace flaxpp::nn
