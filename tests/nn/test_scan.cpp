// nn::scan over layers: Flax's names and stacked parameter tree, the stack equal to its layers
// applied one after the other, one traced layer at any depth, activation memory of one carry
// per layer under scan(remat(Block), nothing_saveable), and bad input. Flax's own values are
// the stack_init and stack_grad cases of tests/refs/transformer.json (flaxpp check).
#include <doctest/doctest.h>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/nn/dense.hpp"
#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/nn/normalization.hpp"
#include "flaxpp/nn/remat.hpp"
#include "flaxpp/nn/scan.hpp"
#include "flaxpp/nn/transformer_block.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/scan.hpp"
#include "harness/finite_diff.hpp"

using namespace flaxpp;
namespace cp = flaxpp::checkpoint_policies;

namespace {

const nn::TransformerBlock kBlock{.num_heads = 2, .mlp_dim = 16};

Array x_input(std::int64_t B = 2, std::int64_t T = 3, std::int64_t D = 8) {
  return astype(testing::random_f64(Shape{B, T, D}, 7), DType::f32);
}

// Row `i` of every leaf.
Tree layer_params(const Tree& stacked, std::int64_t i) {
  return tree_map(stacked,
                  [&](const Array& a) { return lax::take(a, Array::scalar(std::int32_t(i))); });
}

// A module that makes a batch_stats variable (not scanned by nn::scan).
struct WithStats {
  static constexpr const char* name = "WithStats";
  Array operator()(nn::Scope& s, const Array& x) const {
    s.variable("batch_stats", "mean", [] { return Array::full(Shape{}, 0.0, DType::f32); });
    return x;
  }
};

// Flax's Stack of scan(remat(Block)) over 3 layers: its child is ScanCheckpointBlock_0.
struct RematStack {
  static constexpr const char* name = "Stack";
  Array operator()(nn::Scope& s, const Array& x) const {
    return s(nn::scan(remat<nn::TransformerBlock>(cp::nothing_saveable())(kBlock), {.length = 3}),
             x);
  }
};

// A layer with batch statistics: Dense, BatchNorm in training mode, relu.
struct BnLayer {
  static constexpr const char* name = "BnLayer";
  bool train = true;
  Array operator()(nn::Scope& s, const Array& x) const {
    const Array h = s(nn::Dense{.features = x.shape()[-1]}, x);
    return relu(s(nn::BatchNorm{.use_running_average = !train, .momentum = 0.5}, h));
  }
};

}  // namespace

TEST_CASE(
    "nn::scan with variable_axes batch_stats: statistics stacked per layer and updated "
    "as each layer alone updates its own") {
  const Array x = astype(testing::random_f64(Shape{6, 4}, 3, -1.0, 2.0), DType::f32);
  const auto stack = nn::scan(BnLayer{}, {.length = 3, .variable_axes = {"params", "batch_stats"}});
  const nn::Variables v = stack.init(random::key(0), x);
  CHECK(v["batch_stats"]["BatchNorm_0"]["mean"].array().shape() == Shape{3, 4});
  const auto [y, updates] = stack.apply_mutable(v, {"batch_stats"}, x);
  // Layer by layer, each with its row of parameters and statistics.
  const nn::Model layer(BnLayer{});
  Array h = x;
  for (std::int64_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    const nn::Variables mine{{"params", layer_params(v["params"], i)},
                             {"batch_stats", layer_params(v["batch_stats"], i)}};
    auto [next, stats] = layer.apply_mutable(mine, {"batch_stats"}, h);
    h = next;
    for (const char* stat : {"mean", "var"})
      CHECK(
          layer_params(updates["batch_stats"], i)["BatchNorm_0"][stat].array().to_vector<float>() ==
          stats["batch_stats"]["BatchNorm_0"][stat].array().to_vector<float>());
  }
  CHECK(y.to_vector<float>() == h.to_vector<float>());
  // Evaluation reads the running averages and writes nothing; training without the
  // collection mutable is Flax's error.
  const auto eval =
      nn::scan(BnLayer{.train = false}, {.length = 3, .variable_axes = {"params", "batch_stats"}});
  const nn::Variables trained{{"params", v["params"]}, {"batch_stats", updates["batch_stats"]}};
  CHECK(eval.apply(trained, x).shape() == Shape{6, 4});
  CHECK_THROWS_WITH_AS(stack.apply(v, x), doctest::Contains("is not mutable"), ValueError);
}

TEST_CASE("nn::scan: ScanBlock_0 / ScanCheckpointBlock_0, every leaf stacked along L") {
  const Array x = x_input();
  const nn::Variables stacked = nn::Model(RematStack{}).init(random::key(0), x);
  REQUIRE(stacked["params"].keys() == std::vector<std::string>{"ScanCheckpointBlock_0"});
  const Tree& layers = stacked["params"]["ScanCheckpointBlock_0"];
  CHECK(layers.at("Dense_0/kernel").array().shape() == Shape{3, 8, 16});
  CHECK(layers.at("MultiHeadDotProductAttention_0/query/kernel").array().shape() ==
        Shape{3, 8, 2, 4});
  for (const Array& leaf : layers.leaves())
    CHECK(leaf.shape()[0] == 3);
  // Layers draw from split keys: no two layers are the same.
  const auto k = layers.at("Dense_0/kernel").array().to_vector<float>();
  CHECK(std::vector<float>(k.begin(), k.begin() + 128) !=
        std::vector<float>(k.begin() + 128, k.begin() + 256));
}

TEST_CASE("nn::scan: the stack is its layers applied one after the other") {
  const Array x = x_input();
  for (std::int64_t L : {1, 2, 4}) {
    CAPTURE(L);
    const auto stack = nn::scan(kBlock, {.length = L});
    const nn::Variables v = stack.init(random::key(L), x);
    const Array y = stack.apply(v, x);
    Array h = x;
    const nn::Model block(kBlock);
    for (std::int64_t i = 0; i < L; ++i)
      h = block.apply(nn::Variables{{"params", layer_params(v["params"], i)}}, h);
    const auto a = y.to_vector<float>(), b = h.to_vector<float>();
    for (std::size_t j = 0; j < a.size(); ++j)
      CHECK(a[j] == doctest::Approx(b[j]).epsilon(1e-5));
  }
}

TEST_CASE("nn::scan: one traced layer at any depth") {
  const Array x = x_input();
  for (std::int64_t L : {2, 6}) {
    const auto stack = nn::scan(kBlock, {.length = L});
    const Tree params = stack.init(random::key(0), x)["params"];
    const std::vector<Array> leaves = params.leaves();
    std::vector<AVal> avals;
    for (const Array& a : leaves)
      avals.push_back(a.aval());
    const ir::Graph g = make_graph(
        [&](std::span<const Array> in) {
          return std::vector<Array>{
              stack.apply(nn::Variables{{"params", params.with_leaves(in)}}, x)};
        },
        avals);
    CHECK(ir::count_eqns(g, scan_p) == 1);
    CHECK(ir::count_eqns(g, lax::dot_general_p) == 8);  // q, k, v, scores, values, out, 2 Dense
  }
}

TEST_CASE("nn::scan(remat(Block), nothing_saveable): one carry per layer between the passes") {
  // The residuals of the loss's VJP grow with depth by one carry (B, T, D) per layer plus the
  // layer's parameters that the backward reads (the stacked operand itself; Dense_1's bias is
  // not read); under dots_with_no_batch_dims_saveable each layer also keeps the unbatched
  // products the backward reads (q, k, v, out and Dense_0; Dense_1's output is not read).
  const std::int64_t B = 2, T = 4, D = 8, M = 16;
  const Array x = x_input(B, T, D);
  auto per_layer = [&](PolicyPtr policy) {
    auto residuals = [&](std::int64_t L) {
      const auto stack = nn::scan(remat<nn::TransformerBlock>(policy)(kBlock), {.length = L});
      const Tree params = stack.init(random::key(0), x)["params"];
      const ArrayFn loss = [&](std::span<const Array> in) {
        return std::vector<Array>{
            sum(square(stack.apply(nn::Variables{{"params", params.with_leaves(in)}}, x)))};
      };
      return vjp(loss, params.leaves()).residual_bytes;
    };
    return (residuals(5) - residuals(3)) / 2;
  };
  const std::int64_t carry = B * T * D * 4;
  const std::int64_t layer_params = (4 * (D * D + D) + 2 * 2 * D + D * M + M + M * D + D) * 4;
  const std::int64_t dense_1_bias = D * 4;
  CHECK(per_layer(cp::nothing_saveable()) == carry + layer_params - dense_1_bias);
  const std::int64_t dots = (3 * B * T * D + B * T * D + B * T * M) * 4;
  CHECK(per_layer(cp::dots_with_no_batch_dims_saveable()) ==
        carry + layer_params - dense_1_bias + dots);
}

TEST_CASE("nn::scan: bad input is a clear error") {
  const Array x = x_input();
  CHECK_THROWS_WITH_AS(nn::scan(kBlock, {.length = 0}).init(random::key(0), x),
                       doctest::Contains("ScanBlock at (root): length must be >= 1"), ValueError);
  const nn::Variables two = nn::scan(kBlock, {.length = 2}).init(random::key(0), x);
  CHECK_THROWS_WITH_AS(nn::scan(kBlock, {.length = 3}).apply(two, x),
                       doctest::Contains("expects it stacked along a leading axis of 3"),
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::scan(WithStats{}, {.length = 2}).init(random::key(0), x),
                       doctest::Contains("creates variables of the \"batch_stats\" collection, "
                                         "which it does not stack; add it to nn::scan's "
                                         "variable_axes"),
                       ValueError);
  // A layer that changes the carry's width (it was "Backend::copy: cannot copy 48 bytes").
  CHECK_THROWS_WITH_AS(
      nn::scan(nn::Dense{.features = 9}, {.length = 2}).init(random::key(0), x),
      doctest::Contains("the scanned layer must return the carry's shape and dtype, f32[2,3,8], "
                        "but layer 0 returned f32[2,3,9]"),
      ValueError);
}

TEST_CASE("scan(remat(Block)): the products each policy recomputes in the backward pass") {
  // The backward graph's dot_generals beyond those of the plain stack's backward (the
  // gradients' products) are the recomputed ones, counted inside the backward scan's body.
  const Array x = x_input(2, 4, 8);
  auto backward_dots = [&](PolicyPtr policy) {
    const nn::Model stack(nn::TransformerStack{
        .num_layers = 3, .num_heads = 2, .mlp_dim = 16, .policy = std::move(policy)});
    const Tree params = stack.init(random::key(0), x)["params"];
    const ArrayFn loss = [&](std::span<const Array> in) {
      return std::vector<Array>{
          sum(square(stack.apply(nn::Variables{{"params", params.with_leaves(in)}}, x)))};
    };
    return ir::count_eqns(*vjp(loss, params.leaves()).backward_graph, lax::dot_general_p);
  };
  const std::int64_t gradients = backward_dots(cp::none());
  CHECK(backward_dots(cp::everything_saveable()) - gradients == 0);
  CHECK(backward_dots(cp::dots_saveable()) - gradients == 0);
  // The scores and the weighted values have batch dimensions: recomputed.
  CHECK(backward_dots(cp::dots_with_no_batch_dims_saveable()) - gradients == 2);
  // Every product but Dense_1's, whose output the backward pass does not read.
  CHECK(backward_dots(cp::nothing_saveable()) - gradients == 7);
}

TEST_CASE("scan(remat(Block)): gradients equal the unrolled stack's under every policy") {
  // The unrolled stack: the plain Block applied to each layer's row of the stacked parameters.
  const Array x = x_input(2, 4, 8);
  const auto plain = nn::scan(kBlock, {.length = 3});
  const Tree params = plain.init(random::key(4), x)["params"];
  const nn::Model block(kBlock);
  const Tree args[] = {params};
  const int argnums[] = {0};
  const ValueAndGrad want = value_and_grad(
      [&](std::span<const Tree> a) {
        Array h = x;
        for (std::int64_t i = 0; i < 3; ++i)
          h = block.apply(nn::Variables{{"params", layer_params(a[0], i)}}, h);
        return sum(square(h));
      },
      args, argnums);
  for (const PolicyPtr& policy : {cp::everything_saveable(), cp::nothing_saveable(),
                                  cp::dots_saveable(), cp::dots_with_no_batch_dims_saveable()}) {
    CAPTURE(policy->str());
    const auto stack = nn::scan(remat<nn::TransformerBlock>(policy)(kBlock), {.length = 3});
    const ValueAndGrad got = value_and_grad(
        [&](std::span<const Tree> a) {
          return sum(square(stack.apply(nn::Variables{{"params", a[0]}}, x)));
        },
        args, argnums);
    CHECK(got.value.item<float>() == doctest::Approx(want.value.item<float>()).epsilon(1e-6));
    for (const auto& [leaf, w] : want.grads[0].flatten()) {
      const std::string& path = leaf;  // (CAPTURE cannot take a structured binding in clang)
      CAPTURE(path);
      const auto g = got.grads[0].at(path).array().to_vector<float>();
      const auto e = w.to_vector<float>();
      for (std::size_t k = 0; k < e.size(); ++k)
        CHECK(g[k] == doctest::Approx(e[k]).epsilon(1e-5).scale(1e-3));
    }
  }
}
