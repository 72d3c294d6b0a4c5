// `flaxpp train CONFIG.json [--max-steps N]`: trains an MLP classifier as the config says,
// with a progress bar, per-epoch evaluation, a metrics CSV, a PNG of the curves, atomic
// checkpoints (each epoch, and on Ctrl-C) and resumption to an identical continuation. Ends
// with the line "test accuracy: 0.NNNN".
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include "cli/commands.hpp"
#include "flaxpp/data/dataset.hpp"
#include "flaxpp/io/checkpoint.hpp"
#include "flaxpp/io/optimizer_spec.hpp"
#include "flaxpp/io/png.hpp"
#include "flaxpp/io/policy_spec.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/train/train_state.hpp"

namespace flaxpp::cli {
namespace {

namespace fs = std::filesystem;
using io::Json;

constexpr const char* kTrainUsage =
    "usage: flaxpp train CONFIG.json [--max-steps N]\n"
    "  Trains the MLP classifier CONFIG describes (see examples/digits.json), writing\n"
    "  metrics.csv, curves.png and a checkpoint into its output_dir, and resuming from that\n"
    "  checkpoint when it exists. Ctrl-C saves a checkpoint and exits. The last line is\n"
    "  \"test accuracy: 0.NNNN\". --max-steps stops (with a checkpoint) after N steps in total.\n";

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) {
  g_interrupted = true;
}

struct Config {
  std::string data_path, label_column;
  double scale = 1.0, test_fraction = 0.2;
  std::vector<std::int64_t> features;
  std::string activation = "relu";
  std::optional<PolicyPtr> policy;
  optim::GradientTransformation tx;
  std::int64_t epochs = 10, batch_size = 32;
  std::int64_t seed = 0;
  fs::path output_dir, checkpoint;
  bool resume = true;
};

// Reads one object of the config, refusing keys it does not know.
class Section {
 public:
  Section(const Json& j, std::string path, std::set<std::string> keys)
      : j_(j), path_(std::move(path)) {
    if (!j_.is_object())
      throw ParseError(detail::str(path_, ": expected an object, got ", io::describe_json(j_)));
    for (const auto& item : j_.items())
      if (!keys.count(item.key())) {
        std::string list;
        for (const auto& k : keys)
          list += (list.empty() ? "" : ", ") + k;
        throw ParseError(
            detail::str(path_, ".", item.key(), ": unknown key; accepted keys: ", list));
      }
  }
  const Json* get(const char* key) const { return j_.contains(key) ? &j_[key] : nullptr; }
  const Json& need(const char* key) const {
    if (!j_.contains(key)) throw ParseError(detail::str(path_, ": missing \"", key, "\""));
    return j_[key];
  }
  std::string string(const char* key, std::string fallback) const {
    const Json* v = get(key);
    if (!v) return fallback;
    if (!v->is_string())
      throw ParseError(
          detail::str(path_, ".", key, ": expected a string, got ", io::describe_json(*v)));
    return v->get<std::string>();
  }
  double number(const char* key, double fallback) const {
    const Json* v = get(key);
    if (!v) return fallback;
    if (!v->is_number())
      throw ParseError(
          detail::str(path_, ".", key, ": expected a number, got ", io::describe_json(*v)));
    return v->get<double>();
  }
  std::int64_t integer(const char* key, std::int64_t fallback, std::int64_t min) const {
    const Json* v = get(key);
    if (!v) return fallback;
    const auto i = io::integer_value(*v, true);
    if (!i || *i < min)
      throw ParseError(detail::str(path_, ".", key, ": expected an integer >= ", min, ", got ",
                                   io::describe_json(*v)));
    return *i;
  }
  const std::string& path() const { return path_; }

 private:
  const Json& j_;
  std::string path_;
};

Config read_config(const std::string& file) {
  const Json j = io::read_json_file(file);
  const Section top(j, "$",
                    {"data", "model", "optimizer", "epochs", "batch_size", "seed", "device",
                     "output_dir", "checkpoint_format", "resume"});
  Config c;
  const Section data(top.need("data"), "$.data",
                     {"path", "label_column", "scale", "test_fraction"});
  c.data_path = data.string("path", "");
  if (c.data_path.empty())
    throw ParseError("$.data.path: missing (a CSV file, e.g. data/digits.csv)");
  c.label_column = data.string("label_column", "");
  c.scale = data.number("scale", 1.0);
  c.test_fraction = data.number("test_fraction", 0.2);
  if (!(c.test_fraction > 0 && c.test_fraction < 1))
    throw ParseError("$.data.test_fraction: expected a number in (0, 1)");
  const Section model(top.need("model"), "$.model", {"features", "activation", "policy", "dtype"});
  const Json& features = model.need("features");
  if (!features.is_array() || features.empty())
    throw ParseError(
        "$.model.features: expected a list of layer sizes, the last being the number of classes");
  for (std::size_t i = 0; i < features.size(); ++i) {
    const auto v = io::integer_value(features[i], true);
    if (!v || *v < 1)
      throw ParseError(detail::str("$.model.features[", i, "]: expected a layer size >= 1"));
    c.features.push_back(*v);
  }
  c.activation = model.string("activation", "relu");
  if (c.activation != "relu" && c.activation != "gelu" && c.activation != "silu" &&
      c.activation != "tanh")
    throw ParseError(detail::str("$.model.activation: \"", c.activation,
                                 "\" is not one of relu, gelu, silu, tanh"));
  if (model.string("dtype", "float32") != "float32")
    throw ParseError("$.model.dtype: only float32 training is supported for now");
  c.policy = model.get("policy") ? io::policy_from_spec(*model.get("policy"), "$.model.policy")
                                 : std::nullopt;
  c.tx = io::optimizer_from_spec(top.need("optimizer"), "$.optimizer");
  c.epochs = top.integer("epochs", 10, 1);
  c.batch_size = top.integer("batch_size", 32, 1);
  c.seed = top.integer("seed", 0, std::numeric_limits<std::int64_t>::min());
  // "auto": the default device (FLAXPP_DEVICE, else the GPU when one is present, else the CPU).
  if (const std::string device = top.string("device", "auto"); device != "auto") {
    try {
      set_default_device(Device::parse(device));
    } catch (const ValueError& e) {
      throw ParseError(detail::str("$.device: ", e.what(), ", or auto"));
    }
  }
  c.output_dir = top.string("output_dir", "runs/train");
  const std::string format = top.string("checkpoint_format", "json");
  if (format != "json" && format != "safetensors" && format != "msgpack")
    throw ParseError(detail::str("$.checkpoint_format: \"", format,
                                 "\" is not one of json, safetensors, msgpack"));
  c.checkpoint = c.output_dir / ("checkpoint." + format);
  c.resume = top.get("resume") ? top.get("resume")->get<bool>() : true;
  return c;
}

Array activate(const std::string& name, const Array& x) {
  if (name == "gelu") return gelu(x);
  if (name == "silu") return silu(x);
  if (name == "tanh") return tanh(x);
  return relu(x);
}

struct EpochMetrics {
  std::int64_t epoch = 0, step = 0;
  float train_loss = 0, train_accuracy = 0, test_loss = 0, test_accuracy = 0;
  double seconds = 0;
};

void write_curves(const fs::path& file, const std::vector<EpochMetrics>& rows) {
  io::Image img(900, 380);
  const io::Rgb black{0, 0, 0}, grey{220, 220, 220}, blue{31, 119, 180}, orange{255, 127, 14};
  auto panel = [&](int x0, const char* title, auto value_of_train, auto value_of_test, float lo,
                   float hi) {
    const int y0 = 40, w = 400, h = 280;
    img.text(x0, 12, title, black);
    for (int k = 0; k <= 4; ++k) {
      const int y = y0 + h - k * h / 4;
      img.line(x0, y, x0 + w, y, grey);
      std::ostringstream label;
      label << std::setprecision(2) << lo + (hi - lo) * static_cast<float>(k) / 4;
      img.text(x0 - 40, y - 4, label.str(), black, 1);
    }
    img.line(x0, y0, x0, y0 + h, black);
    img.line(x0, y0 + h, x0 + w, y0 + h, black);
    auto px = [&](std::size_t i) {
      return x0 + static_cast<int>(
                      rows.size() < 2 ? 0 : i * static_cast<std::size_t>(w) / (rows.size() - 1));
    };
    auto py = [&](float v) {
      return y0 + h -
             static_cast<int>(std::clamp((v - lo) / (hi - lo), 0.0f, 1.0f) * static_cast<float>(h));
    };
    for (std::size_t i = 1; i < rows.size(); ++i) {
      img.line(px(i - 1), py(value_of_train(rows[i - 1])), px(i), py(value_of_train(rows[i])),
               blue);
      img.line(px(i - 1), py(value_of_test(rows[i - 1])), px(i), py(value_of_test(rows[i])),
               orange);
    }
    img.text(x0 + 10, y0 + h + 14, "EPOCH", black);
    img.rect(x0 + 200, y0 + h + 16, x0 + 210, y0 + h + 22, blue);
    img.text(x0 + 214, y0 + h + 14, "TRAIN", black);
    img.rect(x0 + 280, y0 + h + 16, x0 + 290, y0 + h + 22, orange);
    img.text(x0 + 294, y0 + h + 14, "TEST", black);
  };
  float max_loss = 0.0f;
  for (const auto& r : rows)
    max_loss = std::max({max_loss, r.train_loss, r.test_loss});
  panel(
      50, "LOSS", [](const EpochMetrics& r) { return r.train_loss; },
      [](const EpochMetrics& r) { return r.test_loss; }, 0.0f, std::max(max_loss, 1e-3f));
  panel(
      490, "ACCURACY", [](const EpochMetrics& r) { return r.train_accuracy; },
      [](const EpochMetrics& r) { return r.test_accuracy; }, 0.0f, 1.0f);
  io::write_file_atomically(file.string(), img.encode_png());
}

std::vector<EpochMetrics> read_metrics(const fs::path& file) {
  std::vector<EpochMetrics> rows;
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    EpochMetrics m;
    char comma;
    std::istringstream ss(line);
    if (ss >> m.epoch >> comma >> m.step >> comma >> m.train_loss >> comma >> m.train_accuracy >>
        comma >> m.test_loss >> comma >> m.test_accuracy >> comma >> m.seconds)
      rows.push_back(m);
  }
  return rows;
}

void write_metrics(const fs::path& file, const std::vector<EpochMetrics>& rows) {
  std::ostringstream out;
  out << "epoch,step,train_loss,train_accuracy,test_loss,test_accuracy,seconds\n"
      << std::setprecision(9);
  for (const auto& r : rows)
    out << r.epoch << "," << r.step << "," << r.train_loss << "," << r.train_accuracy << ","
        << r.test_loss << "," << r.test_accuracy << "," << r.seconds << "\n";
  io::write_file_atomically(file.string(), out.str());
}

}  // namespace

int train_command(const std::vector<std::string>& args) {
  std::string config_file;
  std::int64_t max_steps = -1;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << kTrainUsage;
      return 0;
    } else if (args[i] == "--max-steps" && i + 1 < args.size()) {
      max_steps = std::stoll(args[++i]);
    } else if (args[i].rfind("--", 0) == 0) {
      std::cerr << "flaxpp train: unknown option " << args[i] << "\n" << kTrainUsage;
      return 2;
    } else {
      config_file = args[i];
    }
  }
  if (config_file.empty()) {
    std::cerr << "flaxpp train: no config file given\n" << kTrainUsage;
    return 2;
  }
  const Config c = read_config(config_file);
  fs::create_directories(c.output_dir);

  data::CsvOptions csv;
  csv.label_column = c.label_column;
  csv.scale = static_cast<float>(c.scale);
  const data::Dataset all = data::load_csv(c.data_path, csv);
  const auto [train_set, test_set] =
      data::train_test_split(all, c.test_fraction, static_cast<std::uint64_t>(c.seed));
  const std::int64_t n = train_set.x.shape()[0];
  const std::int64_t steps_per_epoch = (n + c.batch_size - 1) / c.batch_size;
  std::cout << "training on " << default_device() << "\n";

  const nn::MLP body{.features = c.features, .activation = [act = c.activation](const Array& x) {
                       return activate(act, x);
                     }};
  train::ClassifierStep step(train::mlp_apply(body, c.policy), c.tx);

  train::TrainState state;
  std::vector<EpochMetrics> history;
  const fs::path metrics_file = c.output_dir / "metrics.csv",
                 curves_file = c.output_dir / "curves.png";
  if (c.resume && fs::exists(c.checkpoint)) {
    // Checkpoints load into host memory; training continues on the default device.
    state = step.restore(tree_map(io::load_checkpoint(c.checkpoint.string()),
                                  [](const Array& a) { return a.to(default_device()); }));
    history = read_metrics(metrics_file);
    std::cout << "resuming from " << c.checkpoint.string() << " at step " << state.step << "\n";
  } else {
    const nn::Model model(body);
    state = step.init(model.init(random::key(c.seed),
                                 data::take(train_set, std::vector<std::int64_t>{0}).x)["params"]);
  }
  auto save = [&] { io::save_checkpoint(c.checkpoint.string(), state.to_tree()); };

  std::signal(SIGINT, on_sigint);
  const auto start = std::chrono::steady_clock::now();
  std::int64_t epoch = state.step / steps_per_epoch;
  bool stopped = false;
  for (; epoch < c.epochs && !stopped; ++epoch) {
    const auto batches =
        data::epoch_batches(n, c.batch_size, static_cast<std::uint64_t>(c.seed), epoch, false);
    const auto epoch_start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    float batch_accuracy = 0;  // of a recent batch, measured every 10th step
    std::int64_t done = 0;
    for (std::size_t b = static_cast<std::size_t>(state.step % steps_per_epoch); b < batches.size();
         ++b) {
      const data::Dataset batch = data::take(train_set, batches[b]);
      loss_sum += step(state, batch.x, batch.y);
      if (done % 10 == 0) batch_accuracy = step.evaluate(state.params, batch.x, batch.y).second;
      ++done;
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
      const double rate = static_cast<double>(done * c.batch_size) / std::max(secs, 1e-9);
      const double eta = static_cast<double>((c.epochs - epoch) * steps_per_epoch -
                                             static_cast<std::int64_t>(b) - 1) *
                         static_cast<double>(c.batch_size) / std::max(rate, 1e-9);
      const int filled = static_cast<int>(20 * (b + 1) / batches.size());
      std::fprintf(
          stderr,
          "\repoch %lld/%lld [%s%s] %zu/%zu loss %.4f acc %.3f  %.0f samples/s  ETA %.0fs   ",
          static_cast<long long>(epoch + 1), static_cast<long long>(c.epochs),
          std::string(static_cast<std::size_t>(filled), '#').c_str(),
          std::string(static_cast<std::size_t>(20 - filled), '.').c_str(), b + 1, batches.size(),
          loss_sum / static_cast<double>(done), static_cast<double>(batch_accuracy), rate, eta);
      if (g_interrupted || (max_steps >= 0 && state.step >= max_steps)) {
        stopped = true;
        break;
      }
    }
    std::fprintf(stderr, "\n");
    if (stopped) break;
    const auto [train_loss, train_acc] = step.evaluate(state.params, train_set.x, train_set.y);
    const auto [test_loss, test_acc] = step.evaluate(state.params, test_set.x, test_set.y);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    history.push_back({epoch + 1, state.step, train_loss, train_acc, test_loss, test_acc, secs});
    std::cout << "epoch " << epoch + 1 << "/" << c.epochs << ": train loss " << std::fixed
              << std::setprecision(4) << train_loss << " acc " << train_acc << " | test loss "
              << test_loss << " acc " << test_acc << " | " << std::setprecision(1) << secs << " s"
              << std::defaultfloat << std::endl;
    save();
    write_metrics(metrics_file, history);
    write_curves(curves_file, history);
  }
  if (stopped) {
    save();
    std::cout << (g_interrupted ? "interrupted" : "stopped") << " at step " << state.step
              << ": checkpoint saved to " << c.checkpoint.string()
              << "; run the same command again to resume" << std::endl;
    return g_interrupted ? 130 : 0;
  }
  const auto [test_loss, test_acc] = step.evaluate(state.params, test_set.x, test_set.y);
  (void)test_loss;
  std::cout << "metrics: " << metrics_file.string() << ", curves: " << curves_file.string()
            << ", checkpoint: " << c.checkpoint.string() << " ("
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s)\n";
  std::cout << "test accuracy: " << std::fixed << std::setprecision(4) << test_acc << std::endl;
  return 0;
}

}  // namespace flaxpp::cli
