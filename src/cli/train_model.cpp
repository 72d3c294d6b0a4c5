// The model of a `flaxpp train` config.
#include "cli/train_model.hpp"

#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/ops/activations.hpp"
#include "tools/mlp_apply.hpp"

namespace flaxpp::cli {
namespace {

Array activate(const std::string& name, const Array& x) {
  if (name == "gelu") return gelu(x);
  if (name == "silu") return silu(x);
  if (name == "tanh") return tanh(x);
  return relu(x);
}

}  // namespace

TrainModel train_model(const io::TrainConfig::Model& m, std::int64_t seq_len,
                       std::int64_t vocab_size) {
  if (m.kind == io::TrainConfig::Kind::lm) {
    const nn::Model lm(nn::LanguageModel{.vocab = vocab_size,
                                         .features = m.width,
                                         .num_layers = m.num_layers,
                                         .num_heads = m.num_heads,
                                         .mlp_dim = m.mlp_dim,
                                         .max_len = seq_len,
                                         .policy = m.policy});
    return {[lm](const Tree& params, const Array& x) {
              return lm.apply(nn::Variables{{"params", params}}, x);
            },
            [lm](const random::Key& key, const Array& x) { return lm.init(key, x)["params"]; }};
  }
  const nn::MLP body{.features = m.features, .activation = [act = m.activation](const Array& x) {
                       return activate(act, x);
                     }};
  return {train::mlp_apply(body, m.policy), [body](const random::Key& key, const Array& x) {
            return nn::Model(body).init(key, x)["params"];
          }};
}

}  // namespace flaxpp::cli
