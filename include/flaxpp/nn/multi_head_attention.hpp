// flaxpp/nn/multi_head_attention.hpp — nn.MultiHeadDotProductAttention: query, key and value
// projections (DenseGeneral to (heads, head_dim), children "query", "key", "value"),
// dot_product_attention, and the output projection (DenseGeneral over the last two axes,
// child "out"), as flax/linen/attention.py, with its autoregressive cache (decode) and
// attention_fn. Not supported: dot_general and einsum overrides.
#pragma once

#include <optional>

#include "flaxpp/nn/attention.hpp"
#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn {

// The call's arguments after inputs_q (Flax's keyword arguments). Invalid Arrays are None:
// inputs_k defaults to inputs_q, inputs_v to inputs_k (self-attention).
struct AttentionArgs {
  Array inputs_k{};
  Array inputs_v{};
  Array mask{};  // broadcastable to (batch..., heads, q_length, kv_length)
  std::optional<bool> deterministic{};
  std::optional<random::Key> dropout_rng{};  // else make_rng("dropout") when dropout is on
};

struct MultiHeadDotProductAttention {
  static constexpr const char* name = "MultiHeadDotProductAttention";
  std::int64_t num_heads = 0;
  std::optional<DType> dtype{};
  DType param_dtype = DType::f32;
  std::optional<std::int64_t> qkv_features{};  // none: inputs_q's last axis
  std::optional<std::int64_t> out_features{};  // none: inputs_q's last axis
  bool broadcast_dropout = true;
  double dropout_rate = 0.0;
  std::optional<bool> deterministic{};  // given here or at the call (when dropout_rate > 0)
  initializers::Initializer kernel_init = initializers::lecun_normal();
  std::optional<initializers::Initializer> out_kernel_init{};  // none: kernel_init
  initializers::Initializer bias_init = initializers::zeros();
  std::optional<initializers::Initializer> out_bias_init{};  // none: bias_init
  bool use_bias = true;
  bool normalize_qk = false;  // LayerNorm (no bias) "query_ln" / "key_ln" on query and key
  bool force_fp32_for_softmax = false;
  // Flax's decode: an autoregressive cache in the "cache" collection. Init (inputs of the full
  // length, max_length) makes cached_key and cached_value (batch..., max_length, heads,
  // head_dim) of zeros and cache_index 0; each later apply, with "cache" mutable, takes one
  // position (inputs_q (batch..., 1, features)), writes its key and value at cache_index,
  // attends to the positions cached so far (the given mask combined with
  // arange(max_length) <= cache_index) and advances the index. The caller stops at
  // max_length: a further position would overwrite the last (lax.dynamic_update_slice clamps).
  bool decode = false;
  AttentionFn attention_fn{};  // empty: Flax's dot_product_attention (jax_attention_fn: fused)

  // inputs_q (batch..., q_length, features) -> (batch..., q_length, out_features).
  Array operator()(Scope& s, const Array& inputs_q, const AttentionArgs& args = {}) const;
};

}  // namespace flaxpp::nn
