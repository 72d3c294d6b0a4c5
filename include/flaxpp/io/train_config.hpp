// flaxpp/io/train_config.hpp — the JSON config of `flaxpp train` (examples/digits.json): parsed
// and validated into a TrainConfig, with nothing else done (no device is set, no file but the
// config is read). Errors are ParseErrors naming the JSON path ($.model.features[1]), what was
// expected and what came.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flaxpp/core/device.hpp"
#include "flaxpp/io/checkpoint.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/train/fit.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::io {

// What training does when a loss becomes NaN or infinite ("on_nonfinite"): stop without saving
// the non-finite state (the last finite checkpoint stays), in the spirit of JAX's
// jax_debug_nans; or go on training (and checkpointing) whatever the values.
using train::OnNonfinite;

struct TrainConfig {
  // Either a CSV file (path) for the MLP classifier, or a text file (text) for the language
  // model, read as characters and cut into sequences of seq_len + 1.
  struct Data {
    std::string path;            // a CSV file of numbers with a header line
    std::string label_column;    // the label column's name; empty: the last column
    double scale = 1.0;          // every feature is multiplied by it
    std::string text;            // a text file (the lm model)
    std::int64_t seq_len = 64;   // tokens per training sequence (the lm model)
    double test_fraction = 0.2;  // the share of rows held out for testing, in (0, 1)
  };
  enum class Kind { mlp, lm, cnn };
  struct Model {
    Kind kind = Kind::mlp;
    // mlp: layer sizes, the last being the number of classes.
    std::vector<std::int64_t> features;
    std::string activation = "relu";  // mlp: relu, gelu, silu or tanh
    // lm: the GPT-style model of nn::LanguageModel (width, depth, heads, MLP width); its
    // vocabulary is the text's characters and its max_len data.seq_len.
    std::int64_t width = 0, num_layers = 0, num_heads = 0, mlp_dim = 0;
    // lm: the Blocks' attention: "flax" (Flax's arithmetic, the reference cases'), "fused"
    // (jax.nn.dot_product_attention's fused kernel) or "xla" (its composed arithmetic).
    std::string attention = "flax";
    // cnn: the reference problems' CNN (nn::CNN): features are its ConvBlocks' widths; each row
    // of the CSV is an image of image_shape (H, W, C; H * W * C features, row-major).
    std::vector<std::int64_t> image_shape;
    std::int64_t classes = 0;
    bool use_batchnorm = false;
    // cnn: the rate of nn::CNN's Dropout before its head (0: none). Each step draws its masks
    // from fold_in(dropout key, step), the dropout key split from the seed's key.
    double dropout = 0.0;
    PolicyPtr policy = checkpoint_policies::none();  // the remat policy ("none": no checkpoint)
  };

  Data data;
  Model model;
  Json optimizer_spec;  // as written, so that a resumed run can be compared with it
  optim::GradientTransformation optimizer;
  std::int64_t epochs = 10;
  std::int64_t batch_size = 32;
  std::int64_t seed = 0;
  std::optional<Device> device;  // "auto" (the default device): none
  std::string output_dir = "runs/train";
  CheckpointFormat checkpoint_format = CheckpointFormat::json;
  bool resume = true;  // continue from the checkpoint in output_dir when there is one
  OnNonfinite on_nonfinite = OnNonfinite::stop;
  // Remat by budget (JitOptions::memory_budget): the step's planned peak, in bytes, at most
  // this; the model's checkpoint regions (its policy) choose what to keep within it. 0: none.
  std::int64_t memory_budget = 0;

  // output_dir/checkpoint.<format>
  std::string checkpoint_path() const;
  // The settings a checkpoint's meaning depends on, as JSON keyed like the config
  // ($.data.*, $.model.* but the policy, $.optimizer, $.batch_size, $.seed,
  // $.checkpoint_format): a run may only resume from a checkpoint made with the same ones.
  // epochs, device, policy, memory_budget, resume and on_nonfinite may change between runs.
  Json run_identity() const;
};

// Parses and validates a config from its JSON text; `source` (the file name) starts a syntax
// error's message. Throws ParseError for malformed JSON and for any bad key or value.
TrainConfig parse_train_config(std::string_view text, const std::string& source);
// The same from a file.
TrainConfig read_train_config(const std::string& file);

}  // namespace flaxpp::io
