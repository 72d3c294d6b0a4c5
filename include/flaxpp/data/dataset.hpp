// flaxpp/data/dataset.hpp — Dataset (features + integer labels) held on the host, and the
// platform-independent seeded shuffles that split and batch it. Reading one:
// flaxpp/data/csv.hpp (CSV files) and flaxpp/data/npy.hpp (NumPy .npy files);
// flaxpp/data/char_text.hpp reads a text's sequences from its file a batch at a time.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "flaxpp/core/array.hpp"

namespace flaxpp::data {

// N examples: x holds the features (float32, [N, D] from CSV; [N, ...] from .npy) and y the
// class labels (int32 [N], every label >= 0). Row i of x goes with y[i]. Loaded data sets live
// in host memory (batches are gathered there; the train step moves each batch to the device).
struct Dataset {
  Array x;
  Array y;
};

// A uniformly random permutation of 0..n-1, determined by `seed` alone and identical on every
// platform and standard library: std::mt19937_64's output sequence is fixed by the C++
// standard, and the Fisher-Yates shuffle (i = n-1 down to 1: swap p[i] with p[j], j uniform in
// [0, i]) and its uniform integers (drawn by rejection, so unbiased) are implemented here —
// std::shuffle and std::uniform_int_distribution are implementation-defined and differ
// between libstdc++, libc++ and MSVC.
std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed);

// Rows gathered in the order given (repeats allowed), on the host; the result lives on the
// device of ds.x / ds.y. Throws ValueError for a row outside [0, N).
Dataset take(const Dataset& ds, std::span<const std::int64_t> rows);

// (train, test) row indices of n rows: permutation(n, seed), its first n_test to the test set
// and the rest, in permutation order, to the training set. 0 <= n_test <= n. What
// train_test_split gathers, for data gathered on demand (CharText).
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> train_test_rows(std::int64_t n,
                                                                                std::int64_t n_test,
                                                                                std::uint64_t seed);

// (train, test): the rows of permutation(N, seed), the first round(N * test_fraction) (halves
// away from zero) going to the test set and the rest, in permutation order, to the training
// set. test_fraction must lie in [0, 1].
std::pair<Dataset, Dataset> train_test_split(const Dataset& ds, double test_fraction,
                                             std::uint64_t seed);

// The row indices of each batch of one epoch: permutation(n, seed + epoch) cut into
// consecutive batches of batch_size rows, the last one shorter when batch_size does not divide
// n (or left out when drop_last). Every row appears exactly once per epoch unless dropped.
// Use take(ds, batch) to materialise a batch.
std::vector<std::vector<std::int64_t>> epoch_batches(std::int64_t n, std::int64_t batch_size,
                                                     std::uint64_t seed, std::int64_t epoch,
                                                     bool drop_last);

}  // namespace flaxpp::data
