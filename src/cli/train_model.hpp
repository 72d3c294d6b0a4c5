// The model a `flaxpp train` config describes ($.model): the MLP classifier, the GPT-style
// language model (nn::LanguageModel) over a text's characters, or the CNN (nn::CNN, batch norm
// optional) over images stored as CSV rows. Its apply gives the logits of a batch (and, for
// the CNN with batch norm, the updated batch statistics); init its variables from a key, as
// Flax's init on one batch.
#pragma once

#include <cstdint>
#include <functional>

#include "flaxpp/io/train_config.hpp"
#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/train/train_state.hpp"

namespace flaxpp::cli {

struct TrainModel {
  train::StatefulApplyFn apply;
  // {"params": ...} and, with batch norm, {"batch_stats": ...}.
  std::function<Tree(const random::Key& key, const Array& x)> init;
};

// The language model of a config with "kind": "lm" (nn::LanguageModel, max_len = seq_len).
nn::LanguageModel language_model(const io::TrainConfig::Model& model, std::int64_t seq_len,
                                 std::int64_t vocab_size);

// `vocab_size`: the number of characters of a language model's text (unused for the MLP).
// `data_parallel`: the job has several processes, over which the CNN's batch norm averages its
// statistics.
TrainModel train_model(const io::TrainConfig::Model& model, std::int64_t seq_len,
                       std::int64_t vocab_size, bool data_parallel = false);

}  // namespace flaxpp::cli
