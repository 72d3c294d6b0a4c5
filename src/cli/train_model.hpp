// The model a `flaxpp train` config describes ($.model): the MLP classifier, or the GPT-style
// language model (nn::LanguageModel) over a text's characters. Its apply gives the logits of a
// batch; init its parameters from a key, as Flax's init on one batch.
#pragma once

#include <cstdint>
#include <functional>

#include "flaxpp/io/train_config.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/train/train_state.hpp"

namespace flaxpp::cli {

struct TrainModel {
  train::ApplyFn apply;
  std::function<Tree(const random::Key& key, const Array& x)> init;  // the params collection
};

// `vocab_size`: the number of characters of a language model's text (unused for the MLP).
TrainModel train_model(const io::TrainConfig::Model& model, std::int64_t seq_len,
                       std::int64_t vocab_size);

}  // namespace flaxpp::cli
