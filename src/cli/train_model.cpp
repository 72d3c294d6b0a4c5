// The model of a `flaxpp train` config.
#include "cli/train_model.hpp"

#include "flaxpp/nn/cnn.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "tools/cnn_apply.hpp"
#include "tools/mlp_apply.hpp"

namespace flaxpp::cli {
namespace {

Array activate(const std::string& name, const Array& x) {
  if (name == "gelu") return gelu(x);
  if (name == "silu") return silu(x);
  if (name == "tanh") return tanh(x);
  return relu(x);
}

// An apply without batch statistics as a StatefulApplyFn.
train::StatefulApplyFn stateless(train::ApplyFn apply) {
  return [apply = std::move(apply)](const Tree& params, const Tree& stats, const Array& x,
                                    const train::ApplyMode&) {
    return std::pair<Array, Tree>{apply(params, x), stats};
  };
}

// The CNN over CSV rows: each batch (B, H * W * C) seen as images (B, H, W, C).
TrainModel cnn_model(const io::TrainConfig::Model& m, bool data_parallel) {
  const nn::CNN cnn{.features = m.features,
                    .classes = m.classes,
                    .policy = m.policy,
                    .use_batchnorm = m.use_batchnorm,
                    .axis_name = data_parallel ? std::optional<std::string>("batch") : std::nullopt,
                    .dropout = m.dropout};
  const std::vector<std::int64_t> image = m.image_shape;
  const auto images = [image](const Array& x) {
    const std::int64_t size = image[0] * image[1] * image[2];
    if (x.rank() != 2 || x.shape()[1] != size)
      throw ValueError(detail::str("$.model.image_shape [", image[0], ", ", image[1], ", ",
                                   image[2], "] needs rows of ", size, " features, but the data's ",
                                   "rows are ", x.aval(), "; fix image_shape or the data"));
    return reshape(x, {x.shape()[0], image[0], image[1], image[2]});
  };
  return {train::cnn_apply(cnn, images),
          [model = nn::Model(cnn), images](const random::Key& key, const Array& x) {
            return model.init(key, images(x));
          }};
}

}  // namespace

nn::LanguageModel language_model(const io::TrainConfig::Model& m, std::int64_t seq_len,
                                 std::int64_t vocab_size) {
  return {.vocab = vocab_size,
          .features = m.width,
          .num_layers = m.num_layers,
          .num_heads = m.num_heads,
          .mlp_dim = m.mlp_dim,
          .max_len = seq_len,
          .policy = m.policy,
          .attention_fn = nn::attention_fn_named(m.attention)};
}

TrainModel train_model(const io::TrainConfig::Model& m, std::int64_t seq_len,
                       std::int64_t vocab_size, bool data_parallel) {
  if (m.kind == io::TrainConfig::Kind::lm) {
    const nn::Model lm(language_model(m, seq_len, vocab_size));
    return {stateless([lm](const Tree& params, const Array& x) {
              return lm.apply(nn::Variables{{"params", params}}, x);
            }),
            [lm](const random::Key& key, const Array& x) { return lm.init(key, x); }};
  }
  if (m.kind == io::TrainConfig::Kind::cnn) return cnn_model(m, data_parallel);
  const nn::MLP body{.features = m.features, .activation = [act = m.activation](const Array& x) {
                       return activate(act, x);
                     }};
  return {stateless(train::mlp_apply(body, m.policy)),
          [body](const random::Key& key, const Array& x) { return nn::Model(body).init(key, x); }};
}

}  // namespace flaxpp::cli
