// The logits `flaxpp generate` samples from: those of the last position of a language model
// reading at most its last max_len tokens. With the autoregressive cache (LanguageModel's
// decode), each new token costs one position's work while the text fits max_len: the tokens
// are fed one at a time through one jitted step that updates the cache in place. Beyond
// max_len the model's absolute positions shift with every token, so no cache stays valid:
// each token then runs the whole window again, as without the cache.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/transforms/jit.hpp"

namespace flaxpp::cli {

class LmSampler {
 public:
  // `params` on the device the model runs on. With model.decode, `cache` is the empty cache
  // that init of the decoding model made (Flax's variables["cache"]); without, the sampler
  // always runs the window.
  LmSampler(nn::LanguageModel model, Tree params, Tree cache = {});

  // The logits (1, 1, vocab) that follow `tokens`. Successive calls extend one text: each
  // call's tokens start with the previous call's.
  Array next_logits(std::span<const std::int32_t> tokens);

 private:
  nn::LanguageModel model_;  // decode off: the window's
  Tree params_;
  std::optional<Jitted> decode_step_;  // (params, cache, token (1, 1)) -> (logits, cache)
  Tree cache_;
  std::size_t fed_ = 0;  // the tokens the cache holds
  Array last_logits_;
};

}  // namespace flaxpp::cli
