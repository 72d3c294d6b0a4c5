// flaxpp/data/dataset.hpp — Dataset (features + integer labels) read from CSV or NumPy .npy on
// the host, and the platform-independent seeded shuffles that split and batch it; no streaming.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
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

struct CsvOptions {
  // The column holding the label. With a header, its name; without one, its 0-based index
  // written in decimal ("0"). Empty: the last column.
  std::string label_column = {};
  // Whether the first non-blank line names the columns (and holds no data).
  bool header = true;
  // Every feature is multiplied by this (in double, then rounded to float32); the digits data
  // set uses 1.0f / 16 to map its pixel counts 0..16 onto [0, 1].
  float scale = 1.0f;
  // How error messages name these options ("Set CsvOptions::label_column to ..."); a program
  // that takes them from its own config names its keys instead (flaxpp train: "$.data.").
  std::string option_prefix = "CsvOptions::";
};

// Reads a CSV file of numbers: one example per line, every line with the same number of
// comma-separated fields, all but the label column being features (in file order). Blank lines
// are skipped, "\r\n" line ends and a UTF-8 byte-order mark are accepted, fields may be padded
// with spaces. Labels must be integers >= 0 that fit int32. Malformed input throws ParseError
// naming file:line and what was expected; a label_column the file lacks throws ValueError. A
// file whose numbers would need more host memory than is available is refused (ParseError)
// before they are stored.
Dataset load_csv(const std::string& path, CsvOptions opts = {});
// The same from CSV text in memory; `source` (e.g. a file name) starts every error message.
Dataset parse_csv(std::string_view text, const std::string& source, CsvOptions opts = {});

// Reads a NumPy .npy file (format versions 1.0, 2.0 and 3.0) in C order, any shape including
// 0-d. dtypes '<f4', '<f8', '<i4', '<u4' and '|b1' load as float32, float64, int32, uint32 and
// bool; '<i8' loads as int32 when every value fits (ParseError naming the first one that does
// not). Anything else — Fortran order, other dtypes or byte orders, a bad magic string, a
// malformed header, missing or extra data bytes — throws ParseError saying what to do.
Array load_npy(const std::string& path);
// The same from .npy bytes in memory; `source` (e.g. a file name) starts every error message.
Array parse_npy(std::string_view bytes, const std::string& source);

// Writes `a` as a .npy file NumPy reads back with np.load (format 1.0, or 2.0 when the header
// needs it). Supports the dtypes with a host storage type (float32, float64, int32, uint32,
// bool); throws ValueError otherwise, or when the file cannot be written.
void save_npy(const std::string& path, const Array& a);

// A Dataset from two .npy files: features of rank >= 1 as float32 (float64 is rounded to
// float32) and labels [N] as int32 ('<i4' or '<i8', every label >= 0).
Dataset from_npy(const std::string& x_path, const std::string& y_path);

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
