// The transformer modules: gelu as Flax calls it, Embed, DenseGeneral, the attention functions
// and masks, MultiHeadDotProductAttention and the refs' Block — Flax's parameter trees and
// keys, float64 finite differences of attention, dropout replayed inside remat, the remat'd
// Block's gradients under every policy, and what the dot policies save. Flax's own values are
// in tests/refs/transformer.json (flaxpp check).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/nn/attention.hpp"
#include "flaxpp/nn/dense_general.hpp"
#include "flaxpp/nn/embed.hpp"
#include "flaxpp/nn/multi_head_attention.hpp"
#include "flaxpp/nn/remat.hpp"
#include "flaxpp/nn/transformer_block.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "harness/finite_diff.hpp"
#include "harness/tree_bits.hpp"

using namespace flaxpp;
using testing::check_grad;
using testing::random_f64;

namespace {

Array f32(const Shape& shape, unsigned seed) {
  return astype(random_f64(shape, seed, -2.0, 2.0), DType::f32);
}

Array ids(std::vector<std::int32_t> v, Shape shape) {
  return Array::from_vector(v, std::move(shape));
}

std::vector<std::string> paths(const Tree& t) {
  std::vector<std::string> out;
  for (const auto& [p, a] : t.flatten())
    out.push_back(p + " " + a.aval().str());
  return out;
}

// A module reading one Embed's table twice: embedding and tied logits (Flax's attend).
struct TiedLM {
  [[maybe_unused]] static constexpr const char* name = "TiedLM";  // a root module: never read
  Array operator()(nn::Scope& s, const Array& tokens) const {
    const nn::Embed embed{.num_embeddings = 6, .features = 4};
    const Array h = s(embed, tokens);
    return s.call("Embed_0", embed.attending(), h);
  }
};

// Attention with dropout on its weights, for remat's replay.
struct DropAttention {
  [[maybe_unused]] static constexpr const char* name = "DropAttention";  // a root module
  Array operator()(nn::Scope& s, const Array& x) const {
    return s(nn::MultiHeadDotProductAttention{.num_heads = 2, .dropout_rate = 0.5}, x,
             nn::AttentionArgs{.deterministic = false});
  }
};

// A module with a remat'd Block as an auto-named child.
struct BlockParent {
  [[maybe_unused]] static constexpr const char* name = "BlockParent";  // a root module
  Array operator()(nn::Scope& s, const Array& h) const {
    return s(remat<nn::TransformerBlock>()(nn::TransformerBlock{.num_heads = 2, .mlp_dim = 16}), h);
  }
};

// sum(model.apply({"params": p}, x) ** 2) and its gradients.
template <class Model>
ValueAndGrad loss_and_grads(const Model& model, const Tree& params, const Array& x,
                            const nn::RngStreams& rngs = {}) {
  const Tree args[] = {params};
  const int argnums[] = {0};
  return value_and_grad(
      [&](std::span<const Tree> a) {
        return sum(square(model.apply_with_rngs(nn::Variables{{"params", a[0]}}, rngs, x)));
      },
      args, argnums);
}

}  // namespace

TEST_CASE("gelu: the tanh form equals jax.nn.gelu (Flax's nn.gelu) bit for bit") {
  // jax.nn.gelu(x) of these float32 inputs, eagerly on JAX's CPU backend (jax 0.10.2).
  const std::vector<float> x{-5.5f, -2.25f, -1.0f, -0.3f, -1e-3f, 0.0f,
                             2e-4f, 0.7f,   1.5f,  3.0f,  9.0f};
  const std::vector<float> want{-0.0f,
                                -0.027201354503631592f,
                                -0.15880796313285828f,
                                -0.11462908238172531f,
                                -0.0004996010684408247f,
                                0.0f,
                                0.00010001596092479303f,
                                0.5305701494216919f,
                                1.3995715379714966f,
                                2.9963626861572266f,
                                9.0f};
  CHECK(gelu(Array::from_vector(x, Shape{11})).to_vector<float>() == want);
}

TEST_CASE("Embed: one (num_embeddings, features) table drawn as Flax draws it; ids pick rows") {
  const nn::Model model(nn::Embed{.num_embeddings = 5, .features = 3});
  const Array tokens = ids({4, 0, 2, 2, 1, 4}, Shape{2, 3});
  const nn::Variables v = model.init(random::key(7), tokens);
  CHECK(paths(v) == std::vector<std::string>{"params/embedding f32[5,3]"});
  const Array table = v.at("params/embedding").array();
  // Flax's default_embed_init with the root scope's first key: fold_in(key, H(1)).
  CHECK(table.to_vector<float>() ==
        nn::default_embed_init()(nn::fold_in_static(random::key(7), {}, 1), Shape{5, 3}, DType::f32)
            .to_vector<float>());
  const Array y = model.apply(v, tokens);
  CHECK(y.aval() == AVal{Shape{2, 3, 3}, DType::f32});
  CHECK(y.to_vector<float>() == lax::take(table, tokens).to_vector<float>());
  // uint32 ids work too.
  CHECK(model.apply(v, astype(tokens, DType::u32)).to_vector<float>() == y.to_vector<float>());
}

TEST_CASE("Embed: ids outside [0, num_embeddings) and non-integer ids are clear errors") {
  const nn::Model model(nn::Embed{.num_embeddings = 5, .features = 3});
  const nn::Variables v = model.init(random::key(0), ids({0}, Shape{1}));
  CHECK_THROWS_WITH_AS(model.apply(v, ids({1, 5}, Shape{2})),
                       doctest::Contains("num_embeddings 5): token ids: index 5 (element 1"),
                       ValueError);
  CHECK_THROWS_WITH_AS(model.apply(v, ids({-1}, Shape{1})), doctest::Contains("outside [0, 5)"),
                       ValueError);
  // A uint32 id of 2^31 or more: refused, not wrapped.
  CHECK_THROWS_WITH_AS(
      model.apply(v, Array::from_vector(std::vector<std::uint32_t>{3000000000u}, Shape{1})),
      doctest::Contains("outside [0, 5)"), ValueError);
  CHECK_THROWS_WITH_AS(model.apply(v, zeros(Shape{2})),
                       doctest::Contains("token ids must be int32 or uint32"), ValueError);
}

TEST_CASE("Embed.attend reads the same table: logits = h @ embedding.T, one parameter") {
  const nn::Model model(TiedLM{});
  const Array tokens = ids({1, 5, 0}, Shape{3});
  const nn::Variables v = model.init(random::key(2), tokens);
  CHECK(paths(v) == std::vector<std::string>{"params/Embed_0/embedding f32[6,4]"});
  const Array table = v.at("params/Embed_0/embedding").array();
  const Array logits = model.apply(v, tokens);
  CHECK(logits.aval() == AVal{Shape{3, 6}, DType::f32});
  const Array want = matmul(lax::take(table, tokens), transpose(table));
  CHECK(logits.to_vector<float>() == want.to_vector<float>());
}

TEST_CASE("DenseGeneral: kernels (D, H, D/H) and (H, D/H, D) drawn flat and reshaped, as Flax") {
  const Array x = f32(Shape{2, 3, 8}, 1);
  const nn::Model proj(nn::DenseGeneral{.features = {2, 4}});
  const nn::Variables v = proj.init(random::key(0), x);
  CHECK(paths(v) == std::vector<std::string>{"params/bias f32[2,4]", "params/kernel f32[8,2,4]"});
  // lecun_normal on the flat (8, 8) shape with the root's first key, then reshaped.
  const random::Key k1 = nn::fold_in_static(random::key(0), {}, 1);
  CHECK(v.at("params/kernel").array().to_vector<float>() ==
        initializers::lecun_normal()(k1, Shape{8, 8}, DType::f32).to_vector<float>());
  const Array y = proj.apply(v, x);
  CHECK(y.aval() == AVal{Shape{2, 3, 2, 4}, DType::f32});
  const Array flat = matmul(x, reshape(v.at("params/kernel").array(), {8, 8}));
  CHECK(reshape(y, {2, 3, 8}).to_vector<float>() == flat.to_vector<float>());

  const nn::Model out(nn::DenseGeneral{.features = {8}, .axis = {-2, -1}});
  const nn::Variables w = out.init(random::key(0), y);
  CHECK(paths(w) == std::vector<std::string>{"params/bias f32[8]", "params/kernel f32[2,4,8]"});
  CHECK(out.apply(w, y).aval() == AVal{Shape{2, 3, 8}, DType::f32});
}

TEST_CASE("DenseGeneral: batch_dims get a kernel each; bad axes are clear errors") {
  const Array x = f32(Shape{3, 5, 4}, 2);
  const nn::Model model(nn::DenseGeneral{.features = {6}, .batch_dims = {0}});
  const nn::Variables v = model.init(random::key(1), x);
  CHECK(paths(v) == std::vector<std::string>{"params/bias f32[3,6]", "params/kernel f32[3,4,6]"});
  const Array y = model.apply(v, x);
  CHECK(y.aval() == AVal{Shape{3, 5, 6}, DType::f32});
  // Batch b: x[b] @ kernel[b] + bias[b].
  const Array kernel = v.at("params/kernel").array(), bias = v.at("params/bias").array();
  const Array want = lax::dot_general(x, kernel, {{2}, {1}, {0}, {0}}) + reshape(bias, {3, 1, 6});
  CHECK(y.to_vector<float>() == want.to_vector<float>());

  CHECK_THROWS_WITH_AS(
      nn::Model(nn::DenseGeneral{.features = {2}, .axis = {3}}).init(random::key(0), x),
      doctest::Contains("axis (3) is out of range"), ValueError);
  CHECK_THROWS_WITH_AS(
      nn::Model(nn::DenseGeneral{.features = {2}, .batch_dims = {1}}).init(random::key(0), x),
      doctest::Contains("consecutive leading dimensions"), ValueError);
  CHECK_THROWS_WITH_AS(nn::Model(nn::DenseGeneral{.features = {}}).init(random::key(0), x),
                       doctest::Contains("features must be one or more sizes > 0"), ValueError);
}

TEST_CASE("make_causal_mask: (batch, 1, T, T), 1 where the key position <= the query's") {
  const Array mask = nn::make_causal_mask(zeros(Shape{2, 3}, DType::i32));
  CHECK(mask.aval() == AVal{Shape{2, 1, 3, 3}, DType::f32});
  const std::vector<float> tri{1, 0, 0, 1, 1, 0, 1, 1, 1};
  std::vector<float> want = tri;
  want.insert(want.end(), tri.begin(), tri.end());
  CHECK(mask.to_vector<float>() == want);
  // make_attention_mask of padding flags: pairwise products, a heads axis, extra batch axes.
  const Array q = Array::from_vector(std::vector<float>{1, 1, 0}, Shape{3});
  const Array pad = nn::make_attention_mask(q, q, {}, 1);
  CHECK(pad.aval() == AVal{Shape{1, 1, 3, 3}, DType::f32});
  CHECK(pad.to_vector<float>() == std::vector<float>{1, 1, 0, 1, 1, 0, 0, 0, 0});
}

TEST_CASE("dot_product_attention: masked keys get no weight; rows of the weights sum to 1") {
  const Array q = f32(Shape{2, 3, 2, 4}, 3), k = f32(Shape{2, 3, 2, 4}, 4);
  const Array mask = nn::make_causal_mask(zeros(Shape{2, 3}, DType::i32));
  const Array w = nn::dot_product_attention_weights(q, k, {.mask = mask});
  CHECK(w.aval() == AVal{Shape{2, 2, 3, 3}, DType::f32});
  const std::vector<float> v = w.to_vector<float>();
  for (std::size_t row = 0; row < v.size() / 3; ++row) {
    const std::size_t t = row % 3;  // the query position
    CHECK(v[row * 3] + v[row * 3 + 1] + v[row * 3 + 2] == doctest::Approx(1.0).epsilon(1e-6));
    for (std::size_t j = t + 1; j < 3; ++j)
      CHECK(v[row * 3 + j] == 0.0f);
  }
}

TEST_CASE("attention: float64 finite differences of q, k, v with a mask, a bias and dropout") {
  const Shape s{2, 4, 3, 2};  // (batch, length, heads, depth)
  const Array mask = nn::make_causal_mask(zeros(Shape{2, 4}, DType::i32));
  const Array bias = random_f64(Shape{1, 3, 4, 4}, 60);
  for (const bool dropout : {false, true}) {
    CAPTURE(dropout);
    const nn::AttentionOptions options{.bias = bias,
                                       .mask = mask,
                                       .dropout_rng = random::key(5),
                                       .dropout_rate = dropout ? 0.4 : 0.0};
    check_grad(
        [&](std::span<const Array> a) {
          return std::vector<Array>{nn::dot_product_attention(a[0], a[1], a[2], options)};
        },
        {random_f64(s, 61), random_f64(s, 62), random_f64(s, 63)});
  }
  // No batch axes at all, value depth != query depth.
  check_grad(
      [&](std::span<const Array> a) {
        return std::vector<Array>{nn::dot_product_attention(a[0], a[1], a[2])};
      },
      {random_f64(Shape{3, 2, 2}, 64), random_f64(Shape{5, 2, 2}, 65),
       random_f64(Shape{5, 2, 3}, 66)});
}

TEST_CASE("dot_product_attention: the output is dot_general(value, weights), transposed") {
  // jnp.einsum('...hqk,...khd->...qhd', w, v) as JAX orders it: value on the left, giving
  // (batch, heads, depth, q_length) before the transpose.
  const Array q = f32(Shape{2, 3, 2, 4}, 5), k = f32(Shape{2, 5, 2, 4}, 6);
  const Array v = f32(Shape{2, 5, 2, 4}, 7);
  const Array w = nn::dot_product_attention_weights(q, k);
  const Array want =
      lax::transpose(lax::dot_general(v, w, {{1}, {3}, {0, 2}, {0, 1}}), {0, 3, 1, 2});
  CHECK(nn::dot_product_attention(q, k, v).to_vector<float>() == want.to_vector<float>());
}

TEST_CASE("dot_product_attention: a mask of the wrong shape and mismatched inputs are errors") {
  const Array q = f32(Shape{2, 3, 2, 4}, 5), k = f32(Shape{2, 3, 2, 4}, 6);
  CHECK_THROWS_WITH_AS(
      nn::dot_product_attention_weights(q, k, {.mask = ones(Shape{2, 1, 4, 3})}),
      doctest::Contains("mask f32[2,1,4,3] does not broadcast to the attention weights"),
      ValueError);
  CHECK_THROWS_WITH_AS(nn::dot_product_attention_weights(q, k, {.mask = ones(Shape{3, 2, 3, 3})}),
                       doctest::Contains("(batch..., heads, q_length, kv_length) = [2,2,3,3]"),
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::dot_product_attention_weights(q, f32(Shape{2, 3, 2, 5}, 7)),
                       doctest::Contains("the same heads and depth"), ValueError);
  CHECK_THROWS_WITH_AS(nn::dot_product_attention(q, k, f32(Shape{2, 4, 2, 4}, 8)),
                       doctest::Contains("value must match key"), ValueError);
  CHECK_THROWS_WITH_AS(nn::dot_product_attention_weights(q, k, {.dropout_rate = 0.5}),
                       doctest::Contains("needs a dropout_rng key"), ValueError);
}

TEST_CASE("MultiHeadDotProductAttention: Flax's children query, key, value, out and their keys") {
  const Array x = f32(Shape{2, 3, 8}, 8);
  const nn::Model model(nn::MultiHeadDotProductAttention{.num_heads = 2});
  const nn::Variables v = model.init(random::key(4), x);
  CHECK(paths(v) ==
        std::vector<std::string>{"params/key/bias f32[2,4]", "params/key/kernel f32[8,2,4]",
                                 "params/out/bias f32[8]", "params/out/kernel f32[2,4,8]",
                                 "params/query/bias f32[2,4]", "params/query/kernel f32[8,2,4]",
                                 "params/value/bias f32[2,4]", "params/value/kernel f32[8,2,4]"});
  for (const char* name : {"query", "key", "value", "out"}) {
    CAPTURE(name);
    const random::Key k = nn::fold_in_static(random::key(4), {name}, 1);
    CHECK(v.at(detail::str("params/", name, "/kernel")).array().to_vector<float>() ==
          initializers::lecun_normal()(k, Shape{8, 8}, DType::f32).to_vector<float>());
  }
  CHECK(model.apply(v, x).aval() == x.aval());
}

TEST_CASE("MultiHeadDotProductAttention: bad head counts, masks and dropout flags are errors") {
  const Array x = f32(Shape{2, 3, 6}, 9);
  CHECK_THROWS_WITH_AS(
      nn::Model(nn::MultiHeadDotProductAttention{.num_heads = 4}).init(random::key(0), x),
      doctest::Contains("num_heads (4) must be > 0 and divide the qkv features (6)"), ValueError);
  const nn::Model model(nn::MultiHeadDotProductAttention{.num_heads = 3});
  const nn::Variables v = model.init(random::key(0), x);
  CHECK_THROWS_WITH_AS(model.apply(v, x, nn::AttentionArgs{.mask = ones(Shape{2, 1, 3, 4})}),
                       doctest::Contains("does not broadcast to the attention weights"),
                       ValueError);
  const nn::Model drop(nn::MultiHeadDotProductAttention{.num_heads = 3, .dropout_rate = 0.1});
  CHECK_THROWS_WITH_AS(drop.init(random::key(0), x), doctest::Contains("needs deterministic"),
                       ValueError);
  const nn::Model both(
      nn::MultiHeadDotProductAttention{.num_heads = 3, .dropout_rate = 0.1, .deterministic = true});
  CHECK_THROWS_WITH_AS(both.init(random::key(0), x, nn::AttentionArgs{.deterministic = true}),
                       doctest::Contains("give it once"), ValueError);
}

TEST_CASE("Attention dropout inside remat: the recomputation replays the same mask") {
  const Array x = f32(Shape{2, 4, 4}, 10);
  const nn::RngStreams rngs{{"dropout", random::key(3)}};
  const nn::Model plain(DropAttention{});
  const Tree params = plain.init(random::key(1), x)["params"];
  const ValueAndGrad a = loss_and_grads(plain, params, x, rngs);
  for (const PolicyPtr& policy :
       {checkpoint_policies::nothing_saveable(), checkpoint_policies::dots_saveable()}) {
    const ValueAndGrad b =
        loss_and_grads(remat<DropAttention>(policy)(DropAttention{}), params, x, rngs);
    CHECK(b.value.to_vector<float>() == a.value.to_vector<float>());
    testing::check_same_bits(b.grads[0], a.grads[0]);
  }
  // Dropout is on: another dropout key gives another loss.
  const nn::RngStreams other{{"dropout", random::key(4)}};
  CHECK(loss_and_grads(plain, params, x, other).value.to_vector<float>() !=
        a.value.to_vector<float>());
}

TEST_CASE("Block: Flax's children, and CheckpointBlock_0 when lifted as an auto-named child") {
  const Array x = f32(Shape{2, 3, 8}, 11);
  const nn::TransformerBlock block{.num_heads = 2, .mlp_dim = 16};
  const nn::Variables v = nn::Model(block).init(random::key(0), x);
  CHECK(paths(v["params"]) ==
        std::vector<std::string>{"Dense_0/bias f32[16]", "Dense_0/kernel f32[8,16]",
                                 "Dense_1/bias f32[8]", "Dense_1/kernel f32[16,8]",
                                 "LayerNorm_0/bias f32[8]", "LayerNorm_0/scale f32[8]",
                                 "LayerNorm_1/bias f32[8]", "LayerNorm_1/scale f32[8]",
                                 "MultiHeadDotProductAttention_0/key/bias f32[2,4]",
                                 "MultiHeadDotProductAttention_0/key/kernel f32[8,2,4]",
                                 "MultiHeadDotProductAttention_0/out/bias f32[8]",
                                 "MultiHeadDotProductAttention_0/out/kernel f32[2,4,8]",
                                 "MultiHeadDotProductAttention_0/query/bias f32[2,4]",
                                 "MultiHeadDotProductAttention_0/query/kernel f32[8,2,4]",
                                 "MultiHeadDotProductAttention_0/value/bias f32[2,4]",
                                 "MultiHeadDotProductAttention_0/value/kernel f32[8,2,4]"});
  const nn::Variables w = nn::Model(BlockParent{}).init(random::key(0), x);
  const random::Key k = nn::fold_in_static(random::key(0), {"CheckpointBlock_0", "Dense_0"}, 1);
  CHECK(w.at("params/CheckpointBlock_0/Dense_0/kernel").array().to_vector<float>() ==
        initializers::lecun_normal()(k, Shape{8, 16}, DType::f32).to_vector<float>());
}

TEST_CASE("Block under remat: the same loss and gradients as the plain Block, every policy") {
  const Array x = f32(Shape{2, 5, 12}, 12);
  const nn::TransformerBlock block{.num_heads = 3, .mlp_dim = 20};
  const nn::Model plain(block);
  const Tree params = plain.init(random::key(6), x)["params"];
  const ValueAndGrad want = loss_and_grads(plain, params, x);
  namespace cp = checkpoint_policies;
  for (const PolicyPtr& policy :
       {cp::everything_saveable(), cp::nothing_saveable(), cp::dots_saveable(),
        cp::dots_with_no_batch_dims_saveable(), cp::save_only_these_names({"a"}),
        cp::save_any_names_but_these({}), cp::offload_dot_with_no_batch_dims(),
        cp::save_and_offload_only_these_names({}, {"a"}),
        cp::save_from_both_policies(cp::dots_saveable(), cp::nothing_saveable())}) {
    CAPTURE(policy->str());
    const ValueAndGrad got =
        loss_and_grads(remat<nn::TransformerBlock>(policy, {}, false)(block), params, x);
    CHECK(got.value.to_vector<float>() == want.value.to_vector<float>());
    testing::check_same_bits(got.grads[0], want.grads[0]);
  }
}

TEST_CASE("Block's saved residuals: dots_saveable adds exactly the two batched products") {
  // dots_with_no_batch_dims_saveable keeps q, k, v, out and the MLP's products; dots_saveable
  // also the scores (B, H, T, T) and the weighted values (B, H, hd, T) — the products with
  // batch dimensions, recomputed under the first policy.
  const Array x = f32(Shape{2, 5, 12}, 13);
  const nn::Model model(nn::TransformerBlock{.num_heads = 3, .mlp_dim = 7});
  const Tree params = model.init(random::key(2), x)["params"];
  std::vector<Array> args = params.leaves();
  args.push_back(x);
  const ArrayFn loss = [&](std::span<const Array> a) {
    const Tree p = params.with_leaves(a.subspan(0, a.size() - 1));
    return std::vector<Array>{sum(square(model.apply(nn::Variables{{"params", p}}, a.back())))};
  };
  auto dot_shapes = [&](const PolicyPtr& policy) {
    std::vector<std::string> out;
    for (const SavedResidual& r : saved_residuals(checkpoint(loss, policy), args)) {
      if (r.kind == SavedResidual::Kind::argument) continue;
      CHECK(r.kind == SavedResidual::Kind::output);
      CHECK(r.primitive == "dot_general");
      out.push_back(r.aval.str());
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  const std::vector<std::string> no_batch =
      dot_shapes(checkpoint_policies::dots_with_no_batch_dims_saveable());
  CHECK(no_batch == std::vector<std::string>{"f32[2,5,12]", "f32[2,5,12]", "f32[2,5,3,4]",
                                             "f32[2,5,3,4]", "f32[2,5,3,4]", "f32[2,5,7]"});
  std::vector<std::string> all = no_batch;
  all.insert(all.end(), {"f32[2,3,4,5]", "f32[2,3,5,5]"});
  std::sort(all.begin(), all.end());
  CHECK(dot_shapes(checkpoint_policies::dots_saveable()) == all);
  CHECK(dot_shapes(checkpoint_policies::nothing_saveable()).empty());
}
