// flaxpp/nn/language_model.hpp — a GPT-style language model as the reference problems spell
// it (shared/docs/refs-format.md, "Transformers"): Stack, scan over Blocks (remat'd with a
// policy, or plain), and LM: Embed + learned positions + Stack + LayerNorm + Dense head.
// Parameter paths and keys are Flax's: Embed_0, pos_embedding, Stack_0/ScanCheckpointBlock_0
// (ScanBlock_0 without remat), LayerNorm_0, Dense_0.
#pragma once

#include <cstdint>
#include <optional>

#include "flaxpp/nn/attention.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::nn {

// Flax's Stack: nn.scan(nn.remat(Block, policy=policy, prevent_cse=False) or Block,
// variable_axes={"params": 0}, split_rngs={"params": True}, length=num_layers).
struct TransformerStack {
  static constexpr const char* name = "Stack";
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t mlp_dim = 0;
  PolicyPtr policy = checkpoint_policies::none();  // none(): the plain Block
  // The Blocks' autoregressive caches, stacked per layer (variable_axes {"params": 0,
  // "cache": 0}).
  bool decode = false;
  AttentionFn attention_fn{};  // the Blocks' attention (empty: Flax's arithmetic)

  // x (B, T, D) -> (B, T, D).
  Array operator()(Scope& s, const Array& x) const;
};

struct LanguageModel {
  static constexpr const char* name = "LM";
  std::int64_t vocab = 0;
  std::int64_t features = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t mlp_dim = 0;
  std::int64_t max_len = 0;
  PolicyPtr policy = checkpoint_policies::none();
  // Autoregressive decoding, as Flax's decode=True (lm1b's AddPositionEmbs and attention
  // caches): init on tokens (B, max_len) makes the "cache" collection (the Blocks' keys and
  // values, and the next position, cache_index); each apply with "cache" mutable then takes
  // one token per sequence (B, 1) at the next position and gives its logits, as the full
  // sequence's apply gives them at that position. At most max_len tokens fit.
  bool decode = false;
  AttentionFn attention_fn{};  // the Blocks' attention (empty: Flax's arithmetic)

  // tokens int32 (B, T), T <= max_len, ids in [0, vocab) -> logits (B, T, vocab).
  Array operator()(Scope& s, const Array& tokens) const;
};

}  // namespace flaxpp::nn
