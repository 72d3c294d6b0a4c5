// The `flaxpp train` config (io/train_config): values, defaults, and a refusal naming the JSON
// path for every bad key or value, never the JSON library's exception.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "flaxpp/io/train_config.hpp"
#include "harness/errors.hpp"

using namespace flaxpp;
using flaxpp::testing::has;
using flaxpp::testing::parse_error_of;

namespace {

const char* const kMinimal =
    R"({"data": {"path": "d.csv"}, "model": {"features": [3]}, "optimizer": {"name": "sgd", "learning_rate": 0.1}})";

// kMinimal with `key` (a JSON path below the top, "a.b") set to `value` (JSON text).
std::string with(const std::string& key, const std::string& value) {
  io::Json j = io::Json::parse(kMinimal);
  io::Json* at = &j;
  std::stringstream parts(key);
  for (std::string part; std::getline(parts, part, '.');)
    at = &(*at)[part];
  *at = io::Json::parse(value);
  return j.dump();
}

io::TrainConfig parse(const std::string& text) {
  return io::parse_train_config(text, "cfg.json");
}

}  // namespace

TEST_CASE("parse_train_config: examples/digits.json parses to its values") {
  const io::TrainConfig c =
      io::read_train_config(std::string(FLAXPP_SOURCE_DIR) + "/examples/digits.json");
  CHECK(c.data.path == "data/digits.csv");
  CHECK(c.data.label_column == "label");
  CHECK(c.data.scale == 0.0625);
  CHECK(c.model.features == std::vector<std::int64_t>{128, 10});
  CHECK(!checkpoint_policies::is_none(c.model.policy));
  CHECK(c.epochs == 30);
  CHECK(c.batch_size == 32);
  CHECK(!c.device.has_value());  // "auto"
  CHECK(c.checkpoint_path() == "runs/digits/checkpoint.json");
  CHECK(c.resume);
  CHECK(c.on_nonfinite == io::OnNonfinite::stop);
}

TEST_CASE("parse_train_config: defaults, and the keys that change them") {
  const io::TrainConfig c = parse(kMinimal);
  CHECK(c.data.test_fraction == 0.2);
  CHECK(c.model.activation == "relu");
  CHECK(checkpoint_policies::is_none(c.model.policy));
  CHECK(c.epochs == 10);
  CHECK(c.batch_size == 32);
  CHECK(c.seed == 0);
  CHECK(c.output_dir == "runs/train");
  CHECK(c.checkpoint_format == io::CheckpointFormat::json);
  CHECK(c.resume);
  CHECK(c.on_nonfinite == io::OnNonfinite::stop);
  CHECK(!parse(with("resume", "false")).resume);
  CHECK(parse(with("on_nonfinite", "\"continue\"")).on_nonfinite == io::OnNonfinite::keep_going);
  CHECK(parse(with("checkpoint_format", "\"msgpack\"")).checkpoint_path() ==
        "runs/train/checkpoint.msgpack");
  CHECK(parse(with("device", "\"cpu\"")).device == Device::cpu());
  CHECK(parse(with("seed", "-3")).seed == -3);
  CHECK(c.memory_budget == 0);
  CHECK(parse(with("memory_budget", "\"48MiB\"")).memory_budget == 48 * 1024 * 1024);
  CHECK(parse(with("memory_budget", "1000000")).memory_budget == 1000000);
  CHECK(parse(with("batch_size", "9223372036854775807")).batch_size ==
        std::numeric_limits<std::int64_t>::max());
}

TEST_CASE("parse_train_config: the CNN's settings, and what identifies its run") {
  io::Json j = io::Json::parse(kMinimal);
  j["model"] = io::Json::parse(
      R"({"kind": "cnn", "features": [8, 16], "classes": 10, "image_shape": [8, 8, 1],)"
      R"( "use_batchnorm": true, "policy": "dots_saveable"})");
  const io::TrainConfig c = parse(j.dump());
  CHECK(c.model.kind == io::TrainConfig::Kind::cnn);
  CHECK(c.model.features == std::vector<std::int64_t>{8, 16});
  CHECK(c.model.image_shape == std::vector<std::int64_t>{8, 8, 1});
  CHECK(c.model.classes == 10);
  CHECK(c.model.use_batchnorm);
  CHECK(c.run_identity()["model"]["kind"] == "cnn");
  j["model"]["image_shape"] = io::Json::parse("[8, 8]");
  CHECK(has(parse_error_of([&] { parse(j.dump()); }),
            "$.model.image_shape: expected [height, width, channels], got 2 numbers"));
  j["model"]["image_shape"] = io::Json::parse("[8, 8, 1]");
  j["model"].erase("classes");
  CHECK(has(parse_error_of([&] { parse(j.dump()); }), "$.model.classes: missing"));
  j["model"]["classes"] = 10;
  j["model"]["activation"] = "relu";
  CHECK(has(parse_error_of([&] { parse(j.dump()); }),
            "$.model.activation: not a setting of kind cnn"));
}

TEST_CASE("parse_train_config: a bad value names its key, what was expected and what came") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {with("resume", "\"yes\""), "$.resume: expected true or false, got the string \"yes\""},
      {with("on_nonfinite", "\"skip\""), "$.on_nonfinite: \"skip\" is not one of stop, continue"},
      {with("memory_budget", "\"48 mb\""),
       "$.memory_budget: expected a positive number of bytes such as 48MiB"},
      {with("memory_budget", "0"),
       "$.memory_budget: expected a size such as \"48MiB\" or a positive number of bytes, got "
       "the number 0"},
      {with("epochs", "0"), "$.epochs: expected an integer >= 1, got the number 0"},
      {with("epochs", "2.5"), "$.epochs: expected an integer >= 1"},
      {with("batch_size", "-1"), "$.batch_size: expected an integer >= 1"},
      {with("batch_size", "1e30"), "$.batch_size: expected an integer >= 1"},
      {with("model.features", "[]"), "$.model.features: expected a list of layer sizes"},
      {with("model.features", "[4, 0]"), "$.model.features[1]: expected an integer >= 1"},
      {with("model.activation", "\"elu\""), "$.model.activation: \"elu\" is not one of"},
      {with("model.image_shape", "[8, 8, 1]"),
       "$.model.image_shape: a CNN setting; add \"kind\": \"cnn\" or drop it"},
      {with("model.kind", "\"cnn\""), "image_shape"},
      {with("model.dtype", "\"bfloat16\""), "$.model.dtype: only float32"},
      {with("data.test_fraction", "1"), "$.data.test_fraction: expected a number in (0, 1)"},
      {with("data.test_fraction", "0"), "$.data.test_fraction: expected a number in (0, 1)"},
      {with("data.scale", "0"), "$.data.scale: expected a non-zero number"},
      {with("data.path", "\"\""), "$.data.path: missing"},
      {with("data.path", "3"), "$.data.path: expected a string, got the number 3"},
      {with("checkpoint_format", "\"npz\""), "$.checkpoint_format: \"npz\" is not one of json"},
      {with("device", "\"tpu\""), "$.device: unknown device \"tpu\""},
      {with("output_dir", "\"\""), "$.output_dir: expected a directory"},
      {with("learning_rate", "3"), "$.learning_rate: unknown key; accepted keys:"},
      {with("data", "[]"), "$.data: expected an object"},
      {"[1, 2]", "$: expected an object"},
      {R"({"model": {"features": [3]}, "optimizer": {"name": "sgd", "learning_rate": 1}})",
       "$: missing \"data\""},
  };
  for (const auto& c : cases) {
    // No structured binding: CAPTURE and the lambda capture the pair (clang 14 refuses to
    // capture a binding).
    CAPTURE(c.first);
    const std::string msg = parse_error_of([&c] { parse(c.first); });
    CHECK(has(msg, c.second));
    CHECK(!has(msg, "json.exception"));
  }
}

TEST_CASE("parse_train_config: malformed JSON is located by line and column in plain words") {
  const std::string msg = parse_error_of([] { parse("{\n  \"epochs\": ,\n}"); });
  CHECK(has(msg, "cfg.json:2:"));
  CHECK(has(msg, "not valid JSON (parse error at line 2, column 13: syntax error"));
  CHECK(!has(msg, "json.exception"));
  CHECK(has(parse_error_of([] { io::read_train_config("/nonexistent/cfg.json"); }),
            "/nonexistent/cfg.json: cannot open the file"));
}

TEST_CASE("TrainConfig::run_identity: what a checkpoint depends on, and nothing a run may change") {
  const io::TrainConfig a = parse(kMinimal);
  CHECK(a.run_identity() == parse(with("epochs", "99")).run_identity());
  CHECK(a.run_identity() == parse(with("device", "\"cpu\"")).run_identity());
  CHECK(a.run_identity() == parse(with("model.policy", "\"nothing_saveable\"")).run_identity());
  CHECK(a.run_identity() == parse(with("on_nonfinite", "\"continue\"")).run_identity());
  CHECK(a.run_identity() != parse(with("batch_size", "8")).run_identity());
  CHECK(a.run_identity() != parse(with("seed", "1")).run_identity());
  CHECK(a.run_identity() != parse(with("data.test_fraction", "0.5")).run_identity());
  CHECK(a.run_identity() != parse(with("model.features", "[4, 3]")).run_identity());
  CHECK(a.run_identity() != parse(with("optimizer.learning_rate", "0.2")).run_identity());
  CHECK(a.run_identity()["batch_size"] == 32);
}

TEST_CASE("parse_train_config: examples/lm.json, a language model on a text file") {
  const io::TrainConfig c =
      io::read_train_config(std::string(FLAXPP_SOURCE_DIR) + "/examples/lm.json");
  CHECK(c.model.kind == io::TrainConfig::Kind::lm);
  CHECK(c.data.text == "data/genesis.txt");
  CHECK(c.data.seq_len == 64);
  CHECK(c.model.width == 64);
  CHECK(c.model.num_layers == 4);
  CHECK(c.model.num_heads == 4);
  CHECK(c.model.mlp_dim == 256);
  CHECK(!checkpoint_policies::is_none(c.model.policy));
  // What a resumed or sampled run reads back from run.json parses to the same model.
  const io::TrainConfig back = io::parse_train_config(c.run_identity().dump(), "run.json");
  CHECK(back.run_identity() == c.run_identity());
  CHECK(back.model.mlp_dim == 256);
}

TEST_CASE("parse_train_config: language-model keys are checked against the model's kind") {
  const std::string lm =
      R"({"data": {"text": "t.txt"}, "model": {"kind": "lm", "features": 8}, "optimizer": {"name": "sgd", "learning_rate": 0.1}})";
  const auto error_of = [](const std::string& text) {
    return parse_error_of([&] { parse(text); });
  };
  const io::TrainConfig c = parse(lm);
  CHECK(c.data.seq_len == 64);
  CHECK(c.model.num_layers == 4);
  CHECK(c.model.mlp_dim == 32);  // 4 x the width
  CHECK(c.model.attention == "flax");
  CHECK(has(error_of(with("model.attention", "\"fused\"")),
            "$.model.attention: a language-model setting"));
  CHECK(has(error_of(with("model.num_layers", "2")),
            "$.model.num_layers: a language-model setting; add \"kind\": \"lm\""));
  CHECK(has(error_of(with("data.text", "\"t.txt\"")), "give \"path\""));
  CHECK(has(error_of(with("model.kind", "\"lm\"")), "$.model.features: expected the model width"));
  io::Json j = io::Json::parse(lm);
  j["model"]["num_heads"] = 3;
  CHECK(has(error_of(j.dump()), "$.model.num_heads: 3 heads do not divide the width"));
  j = io::Json::parse(lm);
  j["model"]["attention"] = "fused";
  CHECK(parse(j.dump()).model.attention == "fused");
  j["model"]["attention"] = "flash";
  CHECK(has(error_of(j.dump()), "$.model.attention: \"flash\" is not one of flax, fused, xla"));
  j = io::Json::parse(lm);
  j["data"]["scale"] = 2;
  CHECK(has(error_of(j.dump()), "$.data.scale: a CSV setting"));
  j = io::Json::parse(lm);
  j["model"]["kind"] = "mlp";
  CHECK(has(error_of(j.dump()), "$.model.features: expected a list of layer sizes"));
  j["model"]["features"] = io::Json::array({3});
  CHECK(has(error_of(j.dump()), "$.model.kind: the data is a text file"));
  CHECK(
      parse(lm).run_identity() !=
      parse(
          R"({"data": {"text": "t.txt", "seq_len": 32}, "model": {"kind": "lm", "features": 8}, "optimizer": {"name": "sgd", "learning_rate": 0.1}})")
          .run_identity());
}
