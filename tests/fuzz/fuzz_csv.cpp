// Fuzz target: the CSV data reader, as `flaxpp train` uses it: parse (the first byte picks the
// options: header or not, label column by name, index or last), split into train and test
// sets, and gather the first batch.
#include "harness.hpp"

#include "flaxpp/data/csv.hpp"
#include "flaxpp/data/dataset.hpp"

using namespace flaxpp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  data::CsvOptions options;
  options.header = (data[0] & 1) != 0;
  options.label_column = (data[0] & 2) != 0 ? (options.header ? "label" : "0") : "";
  options.scale = (data[0] & 4) != 0 ? 0.0625f : 1.0f;
  fuzz::expect_read_or_refused([&] {
    const data::Dataset all =
        data::parse_csv(fuzz::bytes_of(data + 1, size - 1), "fuzz.csv", options);
    const auto [train, test] = data::train_test_split(all, 0.25, 0);
    const auto batches = data::epoch_batches(train.x.shape()[0], 4, 0, 0, false);
    if (!batches.empty()) data::take(train, batches.front());
  });
  return 0;
}
