// The seeded permutation, row gathering, train/test split and epoch batches of
// flaxpp/data/dataset.hpp. Host code only.
#include "flaxpp/data/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>

#include "flaxpp/core/error.hpp"

namespace flaxpp::data {

namespace {

std::int64_t checked_rows(const Dataset& ds, const char* what) {
  if (!ds.x.valid() || !ds.y.valid())
    throw ValueError(detail::str(what, ": the dataset has a null x or y array"));
  if (ds.x.rank() < 1 || ds.y.rank() < 1)
    throw ValueError(detail::str(what, ": expected x [N, ...] and y [N]; got x ", ds.x.aval(),
                                 " and y ", ds.y.aval()));
  if (ds.x.shape()[0] != ds.y.shape()[0])
    throw ValueError(detail::str(what, ": x has ", ds.x.shape()[0], " rows but y has ",
                                 ds.y.shape()[0], "; expected one label per row"));
  return ds.x.shape()[0];
}

// The rows of `a` (any dtype, leading axis = rows) in the given order, on a's device.
Array gather_rows(const Array& a, std::span<const std::int64_t> rows) {
  const Array host = a.to(Device::cpu());
  std::vector<std::int64_t> dims = a.shape().dims();
  std::int64_t row_elems = 1;
  for (std::size_t i = 1; i < dims.size(); ++i)
    row_elems *= dims[i];
  const std::size_t row_bytes = static_cast<std::size_t>(row_elems) * itemsize(a.dtype());
  std::vector<std::byte> out(rows.size() * row_bytes);
  const auto* src = static_cast<const std::byte*>(host.buffer().data());
  for (std::size_t k = 0; k < rows.size(); ++k)
    std::memcpy(out.data() + k * row_bytes, src + static_cast<std::size_t>(rows[k]) * row_bytes,
                row_bytes);
  dims[0] = static_cast<std::int64_t>(rows.size());
  return Array::from_host_bytes(out.data(), Shape(std::move(dims)), a.dtype(), a.device());
}

// Uniform in [0, bound) for bound >= 1. Draws below 2^64 mod bound are rejected, so the
// accepted range is a whole number of copies of [0, bound) and `r % bound` is unbiased.
std::uint64_t uniform_below(std::mt19937_64& gen, std::uint64_t bound) {
  const std::uint64_t threshold = (std::uint64_t{0} - bound) % bound;
  for (;;) {
    const std::uint64_t r = gen();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace

std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed) {
  if (n < 0) throw ValueError(detail::str("permutation: n must be >= 0, got ", n));
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    p[static_cast<std::size_t>(i)] = i;
  std::mt19937_64 gen(seed);
  for (std::int64_t i = n - 1; i > 0; --i) {
    const std::uint64_t j = uniform_below(gen, static_cast<std::uint64_t>(i) + 1);
    std::swap(p[static_cast<std::size_t>(i)], p[j]);
  }
  return p;
}

Dataset take(const Dataset& ds, std::span<const std::int64_t> rows) {
  const std::int64_t n = checked_rows(ds, "take");
  for (std::int64_t r : rows)
    if (r < 0 || r >= n)
      throw ValueError(detail::str("take: row ", r, " is out of range for a dataset of ", n,
                                   " rows; expected indices in [0, ", n, ")"));
  return Dataset{gather_rows(ds.x, rows), gather_rows(ds.y, rows)};
}

std::pair<Dataset, Dataset> train_test_split(const Dataset& ds, double test_fraction,
                                             std::uint64_t seed) {
  const std::int64_t n = checked_rows(ds, "train_test_split");
  if (!(test_fraction >= 0.0 && test_fraction <= 1.0))
    throw ValueError(detail::str("train_test_split: test_fraction must lie in [0, 1], got ",
                                 test_fraction,
                                 "; e.g. 0.2 keeps a fifth of the rows for testing"));
  const auto [train, test] =
      train_test_rows(n, std::llround(static_cast<double>(n) * test_fraction), seed);
  return {take(ds, train), take(ds, test)};
}

std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> train_test_rows(
    std::int64_t n, std::int64_t n_test, std::uint64_t seed) {
  if (n_test < 0 || n_test > n)
    throw ValueError(detail::str("train_test_rows: n_test must lie in [0, ", n, "], got ", n_test));
  std::vector<std::int64_t> train = permutation(n, seed);
  std::vector<std::int64_t> test(train.begin(), train.begin() + n_test);
  train.erase(train.begin(), train.begin() + n_test);
  return {std::move(train), std::move(test)};
}

std::vector<std::vector<std::int64_t>> epoch_batches(std::int64_t n, std::int64_t batch_size,
                                                     std::uint64_t seed, std::int64_t epoch,
                                                     bool drop_last) {
  if (batch_size < 1)
    throw ValueError(detail::str("epoch_batches: batch_size must be >= 1, got ", batch_size));
  if (epoch < 0) throw ValueError(detail::str("epoch_batches: epoch must be >= 0, got ", epoch));
  const std::vector<std::int64_t> perm = permutation(n, seed + static_cast<std::uint64_t>(epoch));
  std::vector<std::vector<std::int64_t>> batches;
  // start + batch_size could overflow (batch_size up to 2^63 - 1); n - start cannot.
  for (std::int64_t start = 0; start < n;) {
    const std::int64_t end = start + std::min(batch_size, n - start);
    if (drop_last && end - start < batch_size) break;
    batches.emplace_back(perm.begin() + start, perm.begin() + end);
    start = end;
  }
  return batches;
}

}  // namespace flaxpp::data
