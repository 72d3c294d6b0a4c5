// The data of a `flaxpp train` run, checked against the model, and the run's size.
#include "cli/train_data.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <memory>
#include <sstream>
#include <tuple>

#include "cli/sha256.hpp"
#include "flaxpp/core/host_memory.hpp"
#include "flaxpp/data/char_text.hpp"
#include "flaxpp/data/csv.hpp"

namespace flaxpp::cli {
namespace {

namespace fs = std::filesystem;

// Labels must index the model's outputs: softmax cross-entropy with a label >= the class count
// reads past the logits (JAX gives NaN or garbage there, silently).
void check_labels(const data::Dataset& all, const io::TrainConfig::Model& m,
                  const std::string& path) {
  const bool cnn = m.kind == io::TrainConfig::Kind::cnn;
  const std::int64_t classes = cnn ? m.classes : m.features.back();
  const std::vector<std::int32_t> y = all.y.to_vector<std::int32_t>();
  const auto worst = std::max_element(y.begin(), y.end());
  if (worst != y.end() && *worst >= classes)
    throw ValueError(
        detail::str("$.data.path: ", path, " has label ", *worst, " (data row ",
                    worst - y.begin() + 1, "), but the model has ", classes,
                    cnn ? " classes ($.model.classes)" : " classes (the last of $.model.features)",
                    "; labels must lie in [0, ", classes, "). Make ",
                    cnn ? "$.model.classes" : "the last layer size", " at least ", *worst + 1,
                    " or fix the labels"));
}

// A NaN or infinite feature makes every loss NaN, and the run would train on nothing.
void check_features(const data::Dataset& all, const io::TrainConfig& c) {
  const std::vector<float> x = all.x.to_vector<float>();
  const auto bad = std::find_if(x.begin(), x.end(), [](float v) { return !std::isfinite(v); });
  if (bad == x.end()) return;
  const std::int64_t d = all.x.shape()[1], i = bad - x.begin();
  throw ValueError(detail::str("$.data.path: ", c.data.path, " has the non-finite feature ", *bad,
                               " in data row ", i / d + 1, ", feature ", i % d + 1,
                               c.data.scale != 1.0 ? " (after scaling by $.data.scale)" : "",
                               "; training on it gives NaN losses. Fix or drop that row"));
}

// What kind of file system object `status` is, for a refusal.
std::string kind_of(const fs::file_status& status) {
  switch (status.type()) {
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::fifo:
      return "a named pipe";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

// The data file of `key`: a regular file (a directory, a device such as /dev/zero or a pipe
// would give an internal error or be read until memory runs out) that can be opened. Throws
// ParseError naming `key` otherwise.
void require_data_file(std::string_view key, const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!ec && fs::exists(status) && !fs::is_regular_file(status))
    throw ParseError(detail::str(key, ": ", path, " is ", kind_of(status),
                                 "; flaxpp train reads its data from a regular file. Give the "
                                 "path of one (copy a stream into a file first)"));
  if (!std::ifstream(path))
    throw ParseError(detail::str(key, ": cannot open ", path, " (", std::strerror(errno),
                                 "); a relative path is taken from the directory flaxpp runs in, ",
                                 fs::current_path().string()));
}

// data::load_csv, its refusals told in the config's terms: the library's own name for the
// caller ("load_csv: ") gives way to the config key.
data::Dataset read_csv(const std::string& path, const data::CsvOptions& csv) {
  require_data_file("$.data.path", path);
  auto in_config_terms = [](std::string message) {
    if (message.starts_with("load_csv: ")) message.erase(0, 10);
    return "$.data: " + message;
  };
  try {
    return data::load_csv(path, csv);
  } catch (const ParseError& e) {
    throw ParseError(in_config_terms(e.what()));
  } catch (const ValueError& e) {
    throw ValueError(in_config_terms(e.what()));
  }
}

std::string gigabytes(double bytes) {
  std::ostringstream s;
  s << std::setprecision(3) << bytes / 1e9 << " GB";
  return s.str();
}

// The text of $.data.text as sequences of seq_len + 1 character ids, one after the other
// (data::CharText: read from the file a batch at a time).
TrainData load_text(const io::TrainConfig& c) {
  require_data_file("$.data.text", c.data.text);
  std::error_code ec;
  const auto size = fs::file_size(c.data.text, ec);
  if (!ec && size > (std::uint64_t{1} << 30))
    throw ValueError(detail::str("$.data.text: ", c.data.text, " has ", size,
                                 " bytes; a character-level run reads at most 1 GiB"));
  std::shared_ptr<const data::CharText> text;
  try {
    text = std::make_shared<const data::CharText>(c.data.text, c.data.seq_len);
  } catch (const ParseError& e) {
    throw ParseError(detail::str("$.data.text: ", e.what()));
  }
  const std::int64_t n = text->sequences();
  if (n < 2)
    throw ValueError(detail::str("$.data.seq_len: ", c.data.text, " has ", text->bytes(),
                                 " characters, not enough for two sequences of ",
                                 static_cast<std::uint64_t>(c.data.seq_len) + 1,  // no overflow
                                 " (one to train on, one to test); use a shorter seq_len or a "
                                 "longer text"));
  const std::int64_t n_test =
      std::max<std::int64_t>(1, std::llround(static_cast<double>(n) * c.data.test_fraction));
  if (n_test >= n)
    throw ValueError(detail::str("$.data.test_fraction: ", c.data.test_fraction, " of the ", n,
                                 " sequences of ", c.data.text, " leaves none to train on"));
  TrainData d;
  std::tie(d.train, d.test) = data::train_test_rows(n, n_test, static_cast<std::uint64_t>(c.seed));
  d.take = [text](std::span<const std::int64_t> rows) { return text->take(rows); };
  d.row_size = c.data.seq_len;
  d.vocab = text->vocab();
  d.sha256 = file_sha256_hex(c.data.text);
  return d;
}

}  // namespace

TrainData load_train_data(const io::TrainConfig& c) {
  if (c.model.kind == io::TrainConfig::Kind::lm) return load_text(c);
  data::CsvOptions csv;
  csv.label_column = c.data.label_column;
  csv.scale = static_cast<float>(c.data.scale);
  csv.option_prefix = "$.data.";
  const data::Dataset all = read_csv(c.data.path, csv);
  check_labels(all, c.model, c.data.path);
  check_features(all, c);

  // Both sets need rows: an empty test set has no accuracy, an empty train set no steps.
  const std::int64_t n = all.y.shape()[0];
  const std::int64_t n_test = std::llround(static_cast<double>(n) * c.data.test_fraction);
  const auto fraction = [](double f) {
    std::ostringstream s;
    s << std::setprecision(3) << f;
    return s.str();
  };
  if (n_test == 0)
    throw ValueError(detail::str(
        "$.data.test_fraction: ", c.data.test_fraction, " of the ", n, " rows of ", c.data.path,
        " rounds to no test rows, so there would be no test accuracy; use at least ",
        fraction(0.5 / static_cast<double>(n) * 1.001), " (one row)"));
  if (n_test == n)
    throw ValueError(detail::str("$.data.test_fraction: ", c.data.test_fraction, " of the ", n,
                                 " rows of ", c.data.path,
                                 " leaves no rows to train on; use at most ",
                                 fraction(1 - 0.5 / static_cast<double>(n) * 1.001)));
  TrainData d;
  std::tie(d.train, d.test) = data::train_test_rows(n, n_test, static_cast<std::uint64_t>(c.seed));
  d.row_size = all.x.size() / n;
  d.take = [all](std::span<const std::int64_t> rows) { return data::take(all, rows); };
  d.sha256 = file_sha256_hex(c.data.path);
  return d;
}

namespace {

// The rows of `data` at `positions` of `set` (its training or test rows).
data::Dataset rows_at(const TrainData& data, const std::vector<std::int64_t>& set,
                      std::span<const std::int64_t> positions) {
  std::vector<std::int64_t> rows(positions.size());
  for (std::size_t k = 0; k < positions.size(); ++k)
    rows[k] = set.at(static_cast<std::size_t>(positions[k]));
  return data.take(rows);
}

}  // namespace

data::Dataset TrainData::training_rows(std::span<const std::int64_t> positions) const {
  return rows_at(*this, train, positions);
}

data::Dataset TrainData::test_rows(std::span<const std::int64_t> positions) const {
  return rows_at(*this, test, positions);
}

TrainPlan plan_training(const io::TrainConfig& c, const TrainData& d) {
  TrainPlan p;
  p.train_rows = static_cast<std::int64_t>(d.train.size());
  p.batch_rows = std::min(c.batch_size, p.train_rows);
  p.steps_per_epoch = (p.train_rows - 1) / c.batch_size + 1;  // no overflow at any batch_size
  constexpr std::int64_t kMaxSteps = std::numeric_limits<std::int32_t>::max();
  if (c.epochs > kMaxSteps / p.steps_per_epoch)
    throw ValueError(detail::str(
        "$.epochs: ", c.epochs, " epochs of ", p.steps_per_epoch, " steps is more than ", kMaxSteps,
        " steps, the most a checkpoint's step counter (int32, as in optax) holds; "
        "use at most ",
        kMaxSteps / p.steps_per_epoch, " epochs"));
  p.total_steps = c.epochs * p.steps_per_epoch;

  // A lower bound of what training holds at once, in doubles (no overflow): the parameters and
  // their gradients (the optimiser's state comes on top), and the widest layer's activations
  // over one batch (steps and evaluation run a batch at a time; for the language model, per
  // token: the MLP, the logits, or a row of attention scores per head). Compared with the host
  // memory available now (the data is loaded already): the least of what the machine has
  // free, the cgroup's limit and FLAXPP_HOST_MEMORY_LIMIT.
  double params = 0, widest = 0, in = static_cast<double>(d.row_size);
  const auto f64 = [](std::int64_t v) { return static_cast<double>(v); };
  const io::TrainConfig::Model& m = c.model;
  if (m.kind == io::TrainConfig::Kind::lm) {
    const double w = f64(m.width), v = f64(static_cast<std::int64_t>(d.vocab.size()));
    params = f64(m.num_layers) * (4 * w * w + 2 * w * f64(m.mlp_dim)) + 2 * v * w +
             f64(c.data.seq_len) * w;
    widest = in * std::max({f64(m.mlp_dim), v, f64(m.num_heads) * f64(c.data.seq_len)});
  }
  if (m.kind == io::TrainConfig::Kind::cnn) {
    // Per ConvBlock a 3x3 kernel and its activations over the block's input image (each block
    // halves height and width); then the Dense head.
    double channels = f64(m.image_shape[2]), pixels = f64(m.image_shape[0] * m.image_shape[1]);
    for (const std::int64_t f : m.features) {
      params += 9 * channels * f64(f) + f64(f);
      widest = std::max(widest, pixels * f64(f));
      channels = f64(f);
      pixels /= 4;
    }
    params += channels * f64(m.classes) + f64(m.classes);
  } else {
    for (const std::int64_t f : m.features) {
      const auto out = static_cast<double>(f);
      params += in * out + out;
      widest = std::max(widest, out);
      in = out;
    }
  }
  const double weights_bytes = 4 * 2 * params;
  const double activation_bytes = 4 * static_cast<double>(p.batch_rows) * widest;
  const auto memory = static_cast<double>(available_host_memory());
  if (weights_bytes + activation_bytes > memory)
    throw ValueError(detail::str(
        "$.model: training this model needs at least ", gigabytes(weights_bytes + activation_bytes),
        " (", params,
        " parameters and their "
        "gradients: ",
        gigabytes(weights_bytes), "; the widest layer's activations over a batch of ", p.batch_rows,
        " rows: ", gigabytes(activation_bytes), "), more than the ", gigabytes(memory),
        " of host memory available; ",
        activation_bytes > weights_bytes ? "lower $.batch_size, or use a smaller model"
                                         : "use a smaller model (its parameters need the most)"));
  return p;
}

}  // namespace flaxpp::cli
