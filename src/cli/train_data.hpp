// The data and the size of a `flaxpp train` run: the config's CSV loaded and checked against
// the model (labels below the class count, finite features), or its text as sequences of
// character ids (x: seq_len tokens, y: the next token of each) read from the file on demand,
// split into train and test sets that both have rows, and the config's numbers checked against
// it (steps that a checkpoint can count, a model that fits in memory). Every refusal names the
// config key to change.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "flaxpp/data/dataset.hpp"
#include "flaxpp/io/train_config.hpp"

namespace flaxpp::cli {

struct TrainData {
  // Rows of the data set in the order given, as (x, y) on the host: a CSV's gathered from
  // memory, a text's sequences read from its file (data::CharText), so that a text of any size
  // costs a batch's memory.
  std::function<data::Dataset(std::span<const std::int64_t>)> take;
  // The split: indices of the rows of the training and the test set, both non-empty
  // (data::permutation(rows, seed), its first round(rows * test_fraction) to the test set).
  std::vector<std::int64_t> train, test;
  // Elements of one row of x: the CSV's features, or seq_len tokens.
  std::int64_t row_size = 0;
  // A text (language-model) run's vocabulary: its characters, the token id of each being its
  // position. Empty for a CSV run.
  std::string vocab;
  // SHA-256 of the data file ($.data.text or $.data.path), as hex: run.json records it.
  std::string sha256;

  // The training set's rows at `positions` (indices into `train`, as data::epoch_batches gives).
  data::Dataset training_rows(std::span<const std::int64_t> positions) const;
  // The test set's rows at `positions` (indices into `test`).
  data::Dataset test_rows(std::span<const std::int64_t> positions) const;
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
