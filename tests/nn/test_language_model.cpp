// The reference problems' LM (Embed + learned positions + scan over remat'd Blocks + LayerNorm
// + Dense head): Flax's parameter tree, logits of every position, and bad input. Its training
// against Flax is the lm_train cases of tests/refs/lm.json (flaxpp check).
#include <doctest/doctest.h>

#include <cmath>

#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/losses.hpp"
#include "flaxpp/transforms/autodiff.hpp"

using namespace flaxpp;

namespace {

nn::LanguageModel lm(PolicyPtr policy) {
  return {.vocab = 11,
          .features = 8,
          .num_layers = 3,
          .num_heads = 2,
          .mlp_dim = 16,
          .max_len = 6,
          .policy = std::move(policy)};
}

Array tokens(std::int64_t B, std::int64_t T) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(B * T));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<std::int32_t>((3 * i + 1) % 11);
  return Array::from_vector(v, Shape{B, T});
}

}  // namespace

TEST_CASE("LM: Flax's parameter tree; logits (B, T, vocab) for any T <= max_len") {
  const nn::Model model(lm(checkpoint_policies::nothing_saveable()));
  const nn::Variables v = model.init(random::key(0), tokens(2, 6));
  const Tree& p = v["params"];
  CHECK(p.keys() ==
        std::vector<std::string>{"Dense_0", "Embed_0", "LayerNorm_0", "Stack_0", "pos_embedding"});
  CHECK(p.at("Embed_0/embedding").array().shape() == Shape{11, 8});
  CHECK(p.at("pos_embedding").array().shape() == Shape{6, 8});
  CHECK(p.at("Stack_0/ScanCheckpointBlock_0/Dense_0/kernel").array().shape() == Shape{3, 8, 16});
  CHECK(nn::Model(lm(checkpoint_policies::none()))
            .init(random::key(0), tokens(2, 6))["params"]["Stack_0"]
            .keys() == std::vector<std::string>{"ScanBlock_0"});
  CHECK(model.apply(v, tokens(2, 6)).shape() == Shape{2, 6, 11});
  CHECK(model.apply(v, tokens(3, 4)).shape() == Shape{3, 4, 11});
  // Next-token cross-entropy differentiates through the scan.
  const auto [loss, grads] = value_and_grad([&](const Tree& q) {
    const Array t = tokens(2, 6);
    return mean(optim::softmax_cross_entropy_with_integer_labels(
        model.apply(nn::Variables{{"params", q}}, t), t));
  })(p);
  CHECK(std::isfinite(loss.item<float>()));
  CHECK(grads.at("Stack_0/ScanCheckpointBlock_0/Dense_0/kernel").array().shape() ==
        Shape{3, 8, 16});
}

TEST_CASE("LM: a sequence longer than max_len and token ids out of range are clear errors") {
  const nn::Model model(lm(checkpoint_policies::none()));
  CHECK_THROWS_WITH_AS(model.init(random::key(0), tokens(1, 7)),
                       doctest::Contains("a sequence of 7 tokens is longer than max_len 6"),
                       ValueError);
  const nn::Variables v = model.init(random::key(0), tokens(1, 6));
  const Array bad = Array::from_vector(std::vector<std::int32_t>{1, 11}, Shape{1, 2});
  CHECK_THROWS_AS(model.apply(v, bad), ValueError);
  CHECK_THROWS_WITH_AS(model.apply(v, astype(tokens(1, 3), DType::f32)),
                       doctest::Contains("tokens must be int32 (B, T)"), ValueError);
}
