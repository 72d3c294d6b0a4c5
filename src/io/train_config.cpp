// The `flaxpp train` config: JSON → TrainConfig, refusing unknown keys and bad values.
#include "flaxpp/io/train_config.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>

#include "flaxpp/io/byte_size.hpp"
#include "flaxpp/io/optimizer_spec.hpp"
#include "flaxpp/io/policy_spec.hpp"

namespace flaxpp::io {
namespace {

// Reads one object of the config, refusing keys it does not know.
class Section {
 public:
  Section(const Json& j, std::string path, std::set<std::string> keys)
      : j_(j), path_(std::move(path)) {
    if (!j_.is_object())
      throw ParseError(detail::str(path_, ": expected an object, got ", describe_json(j_)));
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
  std::string key_path(const char* key) const { return detail::str(path_, ".", key); }
  std::string string(const char* key, std::string fallback) const {
    const Json* v = get(key);
    if (!v) return fallback;
    if (!v->is_string())
      throw ParseError(detail::str(key_path(key), ": expected a string, got ", describe_json(*v)));
    return v->get<std::string>();
  }
  // One of `choices` (the first is the default).
  std::string choice(const char* key, const std::vector<std::string>& choices) const {
    std::string value = string(key, choices.front());
    if (std::find(choices.begin(), choices.end(), value) != choices.end()) return value;
    std::string list;
    for (const auto& c : choices)
      list += (list.empty() ? "" : ", ") + c;
    throw ParseError(detail::str(key_path(key), ": \"", value, "\" is not one of ", list));
  }
  double number(const char* key, double fallback) const {
    const Json* v = get(key);
    if (!v) return fallback;
    if (!v->is_number())
      throw ParseError(detail::str(key_path(key), ": expected a number, got ", describe_json(*v)));
    return v->get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    const Json* v = get(key);
    if (!v) return fallback;
    if (!v->is_boolean())
      throw ParseError(
          detail::str(key_path(key), ": expected true or false, got ", describe_json(*v)));
    return v->get<bool>();
  }
  std::int64_t integer(const char* key, std::int64_t fallback, std::int64_t min) const {
    const Json* v = get(key);
    if (!v) return fallback;
    const auto i = integer_value(*v, true);
    if (!i || *i < min)
      throw ParseError(detail::str(key_path(key), ": expected an integer >= ", min, ", got ",
                                   describe_json(*v)));
    return *i;
  }

 private:
  const Json& j_;
  std::string path_;
};

TrainConfig::Data read_data(const Section& top) {
  const Section data(top.need("data"), "$.data",
                     {"path", "label_column", "scale", "text", "seq_len", "test_fraction"});
  TrainConfig::Data d;
  d.path = data.string("path", "");
  d.text = data.string("text", "");
  if (d.path.empty() == d.text.empty())
    throw ParseError(
        d.path.empty()
            ? "$.data.path: missing (a CSV file, e.g. data/digits.csv); or give $.data.text, a "
              "text file for a language model (e.g. data/genesis.txt)"
            : "$.data: give \"path\" (a CSV file) or \"text\" (a text file), not both");
  if (!d.text.empty()) {
    for (const char* csv_key : {"label_column", "scale"})
      if (data.get(csv_key))
        throw ParseError(detail::str("$.data.", csv_key,
                                     ": a CSV setting, but $.data.text is a "
                                     "text file; drop it"));
    d.seq_len = data.integer("seq_len", 64, 1);
  } else if (data.get("seq_len")) {
    throw ParseError("$.data.seq_len: a text setting, but $.data.path is a CSV file; drop it");
  }
  d.label_column = data.string("label_column", "");
  d.scale = data.number("scale", 1.0);
  if (d.scale == 0)
    throw ParseError(
        "$.data.scale: expected a non-zero number (every feature is multiplied by "
        "it), got 0");
  d.test_fraction = data.number("test_fraction", 0.2);
  if (!(d.test_fraction > 0 && d.test_fraction < 1))
    throw ParseError(detail::str("$.data.test_fraction: expected a number in (0, 1), got ",
                                 d.test_fraction, "; e.g. 0.2 holds out a fifth of the rows"));
  return d;
}

// The language model's sizes ($.model with "kind": "lm").
void read_lm(const Section& model, TrainConfig::Model& m) {
  for (const char* mlp_key : {"activation"})
    if (model.get(mlp_key))
      throw ParseError(detail::str("$.model.", mlp_key, ": an MLP setting; drop it for kind lm"));
  const Json& width = model.need("features");
  const auto w = integer_value(width, true);
  if (!w || *w < 1)
    throw ParseError(
        detail::str("$.model.features: expected the model width (an integer >= 1) "
                    "for kind lm, got ",
                    describe_json(width)));
  m.width = *w;
  m.num_layers = model.integer("num_layers", 4, 1);
  m.num_heads = model.integer("num_heads", 4, 1);
  m.mlp_dim = model.integer("mlp_dim", 4 * m.width, 1);
  m.attention = model.choice("attention", {"flax", "fused", "xla"});
  if (m.width % m.num_heads != 0)
    throw ParseError(detail::str("$.model.num_heads: ", m.num_heads,
                                 " heads do not divide the width $.model.features ", m.width,
                                 "; choose a divisor of it"));
}

// A list of integers >= 1 at $.model.<key>, `what` naming its entries in errors.
std::vector<std::int64_t> positive_list(const Json& list, const std::string& key,
                                        const std::string& what) {
  if (!list.is_array() || list.empty())
    throw ParseError(
        detail::str("$.model.", key, ": expected a list of ", what, ", got ", describe_json(list)));
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto v = integer_value(list[i], true);
    if (!v || *v < 1)
      throw ParseError(detail::str("$.model.", key, "[", i, "]: expected an integer >= 1, got ",
                                   describe_json(list[i])));
    out.push_back(*v);
  }
  return out;
}

// The CNN's settings ($.model with "kind": "cnn").
void read_cnn(const Section& model, TrainConfig::Model& m) {
  for (const char* other : {"activation", "num_layers", "num_heads", "mlp_dim", "attention"})
    if (model.get(other))
      throw ParseError(detail::str("$.model.", other, ": not a setting of kind cnn; drop it"));
  m.features = positive_list(model.need("features"), "features", "ConvBlock widths");
  m.image_shape = positive_list(model.need("image_shape"), "image_shape",
                                "image sizes [height, width, channels]");
  if (m.image_shape.size() != 3)
    throw ParseError(detail::str("$.model.image_shape: expected [height, width, channels], got ",
                                 m.image_shape.size(), " numbers"));
  m.classes = model.integer("classes", 0, 2);
  if (m.classes == 0) throw ParseError("$.model.classes: missing; the number of classes (>= 2)");
  m.use_batchnorm = model.boolean("use_batchnorm", false);
  m.dropout = model.number("dropout", 0.0);
  if (!(m.dropout >= 0.0 && m.dropout < 1.0))
    throw ParseError(detail::str("$.model.dropout: expected a rate in [0, 1), got ", m.dropout,
                                 " (0: no dropout)"));
}

TrainConfig::Model read_model(const Section& top) {
  const Section model(
      top.need("model"), "$.model",
      {"kind", "features", "activation", "num_layers", "num_heads", "mlp_dim", "attention",
       "policy", "dtype", "image_shape", "classes", "use_batchnorm", "dropout"});
  TrainConfig::Model m;
  const std::string kind = model.choice("kind", {"mlp", "lm", "cnn"});
  m.kind = kind == "lm"    ? TrainConfig::Kind::lm
           : kind == "cnn" ? TrainConfig::Kind::cnn
                           : TrainConfig::Kind::mlp;
  if (model.string("dtype", "float32") != "float32")
    throw ParseError("$.model.dtype: only float32 training is supported for now");
  if (const Json* policy = model.get("policy"))
    m.policy = policy_from_spec(*policy, "$.model.policy");
  if (m.kind == TrainConfig::Kind::lm) {
    read_lm(model, m);
    return m;
  }
  if (m.kind == TrainConfig::Kind::cnn) {
    read_cnn(model, m);
    return m;
  }
  for (const char* cnn_key : {"image_shape", "classes", "use_batchnorm", "dropout"})
    if (model.get(cnn_key))
      throw ParseError(
          detail::str("$.model.", cnn_key, ": a CNN setting; add \"kind\": \"cnn\" or drop it"));
  for (const char* lm_key : {"num_layers", "num_heads", "mlp_dim", "attention"})
    if (model.get(lm_key))
      throw ParseError(detail::str("$.model.", lm_key,
                                   ": a language-model setting; add \"kind\": \"lm\" or drop it"));
  m.features = positive_list(model.need("features"), "features",
                             "layer sizes, the last being the number of classes");
  m.activation = model.choice("activation", {"relu", "gelu", "silu", "tanh"});
  return m;
}

TrainConfig from_json(const Json& j) {
  const Section top(j, "$",
                    {"data", "model", "optimizer", "epochs", "batch_size", "seed", "device",
                     "output_dir", "checkpoint_format", "resume", "on_nonfinite", "memory_budget"});
  TrainConfig c;
  c.data = read_data(top);
  c.model = read_model(top);
  const bool lm = c.model.kind == TrainConfig::Kind::lm;
  if (lm != !c.data.text.empty())
    throw ParseError(lm ? "$.data.text: missing; a language model (\"kind\": \"lm\") trains on a "
                          "text file, e.g. \"text\": \"data/genesis.txt\""
                        : "$.model.kind: the data is a text file ($.data.text); train it with "
                          "\"kind\": \"lm\"");
  c.optimizer_spec = top.need("optimizer");
  c.optimizer = optimizer_from_spec(c.optimizer_spec, "$.optimizer");
  c.epochs = top.integer("epochs", 10, 1);
  c.batch_size = top.integer("batch_size", 32, 1);
  c.seed = top.integer("seed", 0, std::numeric_limits<std::int64_t>::min());
  // "auto": the default device (FLAXPP_DEVICE, else the GPU when one is present, else the CPU).
  if (const std::string device = top.string("device", "auto"); device != "auto") {
    try {
      c.device = Device::parse(device);
    } catch (const ValueError& e) {
      throw ParseError(detail::str("$.device: ", e.what(), ", or auto"));
    }
  }
  c.output_dir = top.string("output_dir", "runs/train");
  if (c.output_dir.empty()) throw ParseError("$.output_dir: expected a directory, got \"\"");
  const std::string format = top.choice("checkpoint_format", {"json", "safetensors", "msgpack"});
  c.checkpoint_format = format == "json"          ? CheckpointFormat::json
                        : format == "safetensors" ? CheckpointFormat::safetensors
                                                  : CheckpointFormat::msgpack;
  c.resume = top.boolean("resume", true);
  // A size ("48MiB") or a number of bytes.
  if (const Json* budget = top.get("memory_budget")) {
    if (budget->is_string()) {
      c.memory_budget = parse_byte_size(budget->get<std::string>(), "$.memory_budget");
    } else {
      const auto bytes = integer_value(*budget, true);
      if (!bytes || *bytes < 1)
        throw ParseError(
            detail::str("$.memory_budget: expected a size such as \"48MiB\" or a "
                        "positive number of bytes, got ",
                        describe_json(*budget)));
      c.memory_budget = *bytes;
    }
  }
  c.on_nonfinite = top.choice("on_nonfinite", {"stop", "continue"}) == "stop"
                       ? OnNonfinite::stop
                       : OnNonfinite::keep_going;
  return c;
}

}  // namespace

std::string TrainConfig::checkpoint_path() const {
  return (std::filesystem::path(output_dir) /
          detail::str("checkpoint.", checkpoint_format_name(checkpoint_format)))
      .string();
}

Json TrainConfig::run_identity() const {
  const bool lm = model.kind == Kind::lm;
  Json d =
      lm ? Json{{"text", data.text}, {"seq_len", data.seq_len}}
         : Json{{"path", data.path}, {"label_column", data.label_column}, {"scale", data.scale}};
  d["test_fraction"] = data.test_fraction;
  Json m = lm ? Json{{"kind", "lm"},
                     {"features", model.width},
                     {"num_layers", model.num_layers},
                     {"num_heads", model.num_heads},
                     {"mlp_dim", model.mlp_dim}}
           : model.kind == Kind::cnn
               ? Json{{"kind", "cnn"},
                      {"features", model.features},
                      {"image_shape", model.image_shape},
                      {"classes", model.classes},
                      {"use_batchnorm", model.use_batchnorm}}
               : Json{{"features", model.features}, {"activation", model.activation}};
  // Only a non-zero rate: the records of runs without dropout stay those they were.
  if (model.dropout > 0.0) m["dropout"] = model.dropout;
  return Json{{"data", d},
              {"model", m},
              {"optimizer", optimizer_spec},
              {"batch_size", batch_size},
              {"seed", seed},
              {"checkpoint_format", checkpoint_format_name(checkpoint_format)}};
}

TrainConfig parse_train_config(std::string_view text, const std::string& source) {
  return from_json(parse_json(text, source));
}

TrainConfig read_train_config(const std::string& file) {
  return from_json(read_json_file(file));
}

}  // namespace flaxpp::io
