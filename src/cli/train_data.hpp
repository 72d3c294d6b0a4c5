// The data and the size of a `flaxpp train` run: the config's CSV loaded and checked against
// the model (labels below the class count, finite features), or its text cut into sequences of
// character ids (x: seq_len tokens, y: the next token of each), split into train and test sets
// that both have rows, and the config's numbers checked against it (steps that a checkpoint
// can count, a model that fits in memory). Every refusal names the config key to change.
#pragma once

#include <cstdint>
#include <string>

#include "flaxpp/data/dataset.hpp"
#include "flaxpp/io/train_config.hpp"

namespace flaxpp::cli {

struct TrainData {
  data::Dataset train, test;
  // A text (language-model) run's vocabulary: its characters, the token id of each being its
  // position. Empty for a CSV run.
  std::string vocab;
  // SHA-256 of the data file ($.data.text or $.data.path), as hex: run.json records it.
  std::string sha256;
};

// Throws ParseError (a malformed file) or ValueError (data the model cannot train on).
TrainData load_train_data(const io::TrainConfig& config);

struct TrainPlan {
  std::int64_t train_rows = 0;
  std::int64_t batch_rows = 0;  // rows in a full batch: batch_size, or all rows when fewer
  std::int64_t steps_per_epoch = 0;
  std::int64_t total_steps = 0;  // epochs * steps_per_epoch, at most 2^31 - 1
};

// Throws ValueError naming the key when the run cannot be done: more steps than a checkpoint's
// int32 step counter holds, or parameters, optimiser state and activations that need more
// memory than the machine has.
TrainPlan plan_training(const io::TrainConfig& config, const TrainData& data);

}  // namespace flaxpp::cli
