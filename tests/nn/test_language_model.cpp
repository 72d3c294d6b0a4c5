// The reference problems' LM (Embed + learned positions + scan over remat'd Blocks + LayerNorm
// + Dense head): Flax's parameter tree, logits of every position, and bad input. Its training
// against Flax is the lm_train cases of tests/refs/lm.json (flaxpp check). Decoding with the
// autoregressive cache gives, one token at a time, the full sequence's logits.
#include <doctest/doctest.h>

#include <cmath>

#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/nn/multi_head_attention.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/ops/slicing.hpp"
#include "flaxpp/optim/losses.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "harness/close.hpp"
#include "harness/tree_bits.hpp"

using namespace flaxpp;

namespace {

nn::LanguageModel lm(PolicyPtr policy, bool decode = false) {
  return {.vocab = 11,
          .features = 8,
          .num_layers = 3,
          .num_heads = 2,
          .mlp_dim = 16,
          .max_len = 6,
          .policy = std::move(policy),
          .decode = decode};
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

TEST_CASE("LM decode: one token at a time gives the full sequence's logits, eager and jitted") {
  for (const PolicyPtr& policy :
       {checkpoint_policies::none(), checkpoint_policies::nothing_saveable()}) {
    const bool plain = checkpoint_policies::is_none(policy);
    CAPTURE(plain);
    const Array seq = tokens(2, 6);
    const Tree params = nn::Model(lm(policy)).init(random::key(0), seq)["params"];
    const Array full = nn::Model(lm(policy)).apply(nn::Variables{{"params", params}}, seq);
    const nn::Model decoder(lm(policy, true));
    // Init on the full length makes the cache: keys and values per layer, and the next position.
    const nn::Variables made = decoder.init(random::key(0), seq);
    const std::string layer = plain ? "ScanBlock_0" : "ScanCheckpointBlock_0";
    const Tree& cache = made["cache"];
    CHECK(cache.at("cache_index").array().item<std::int32_t>() == 0);
    const Tree& attention = cache.at("Stack_0/" + layer + "/MultiHeadDotProductAttention_0");
    CHECK(attention.keys() ==
          std::vector<std::string>{"cache_index", "cached_key", "cached_value"});
    CHECK(attention.at("cached_key").array().shape() == Shape{3, 2, 6, 2, 4});
    CHECK(attention.at("cache_index").array().shape() == Shape{3});
    testing::check_same_bits(made["params"], params);

    const auto step = [&](const Tree& p, const Tree& c, const Array& token) {
      auto [logits, updated] =
          decoder.apply_mutable(nn::Variables{{"params", p}, {"cache", c}}, {"cache"}, token);
      return std::vector<Tree>{Tree(logits), updated["cache"]};
    };
    const Jitted jitted =
        jit([&](std::span<const Tree> a) { return step(a[0], a[1], a[2].array()); },
            {.donate_argnums = {1}});
    Tree eager_cache = cache, jitted_cache = cache;
    for (std::int64_t t = 0; t < 6; ++t) {
      CAPTURE(t);
      const Array token = slice(seq, {{}, {t, t + 1}});
      const Array want = astype(slice(full, {{}, {t, t + 1}}), DType::f64);
      std::vector<Tree> eager = step(params, eager_cache, token);
      testing::check_close({astype(eager[0].array(), DType::f64)}, {want}, 1e-5);
      eager_cache = eager[1];
      std::vector<Tree> traced = jitted({params, std::move(jitted_cache), Tree(token)});
      testing::check_close({astype(traced[0].array(), DType::f64)}, {want}, 1e-5);
      jitted_cache = traced[1];
    }
    CHECK(eager_cache.at("cache_index").array().item<std::int32_t>() == 6);
    CHECK(jitted_cache.at("cache_index").array().dtype() == DType::i32);
  }
}

TEST_CASE("LM decode: more than one token per call after init is a clear error") {
  const nn::Model decoder(lm(checkpoint_policies::none(), true));
  const nn::Variables v = decoder.init(random::key(0), tokens(1, 6));
  CHECK_THROWS_WITH_AS(decoder.apply_mutable(v, {"cache"}, tokens(1, 2)),
                       doctest::Contains("with decode, apply takes one token per sequence (B, 1)"),
                       ValueError);
  CHECK_THROWS_WITH_AS(decoder.apply(v, tokens(1, 1)),
                       doctest::Contains("collection \"cache\" is not mutable"), ValueError);
  // The attention alone says what Flax says of a query of another shape.
  const nn::Model attention(nn::MultiHeadDotProductAttention{.num_heads = 2, .decode = true});
  const Array x = ones(Shape{1, 5, 4});
  const nn::Variables a = attention.init(random::key(0), x);
  CHECK_THROWS_WITH_AS(
      attention.apply_mutable(a, {"cache"}, ones(Shape{1, 2, 4})),
      doctest::Contains("Autoregressive cache shape error, expected query shape [1,1,2,2] "
                        "instead got [1,2,2,2]"),
      ValueError);
}
