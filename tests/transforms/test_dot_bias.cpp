// jit's fuse_dot_bias pass: a Dense layer's product takes its bias (dot_general_bias), in the
// forward pass and in remat's recomputation alike, with the bits of the product and the add.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "flaxpp/core/device.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/nn/remat.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/trace.hpp"
#include "harness/cuda_parity.hpp"
#include "harness/finite_diff.hpp"
#include "harness/tree_bits.hpp"

using namespace flaxpp;
namespace cp = flaxpp::checkpoint_policies;

namespace {

const nn::MLP kMlp{.features = {16, 16, 10}};

// (params, x) -> (loss, grads) of a squared loss on the MLP, remat'd under `policy`.
TreeFn loss_and_grads(PolicyPtr policy) {
  return [policy](std::span<const Tree> a) {
    auto [loss, grads] = value_and_grad([&](const Tree& params) {
      const nn::Variables v{{"params", params}};
      const Array y = remat<nn::MLP>(policy)(kMlp).apply(v, a[1].array());
      return mean(square(y));
    })(a[0]);
    return std::vector<Tree>{Tree(loss), grads};
  };
}

}  // namespace

TEST_CASE(
    "fuse_dot_bias: each Dense product takes its bias, recomputed products too, with the "
    "same bits") {
  const Array x = astype(testing::random_f64(Shape{12, 8}, 5, -2.0, 2.0), DType::f32);
  const Tree params = nn::Model(kMlp).init(random::key(3), x)["params"];
  const std::vector<Tree> args{params, Tree(x)};
  // The three layers' products in the forward pass, and the ones the backward pass
  // recomputes: under nothing_saveable the two hidden layers' (the last one's output is the
  // region's own), none under dots_with_no_batch_dims_saveable, which saves the products.
  const struct {
    const char* name;
    PolicyPtr policy;
    std::int64_t fused;
  } cases[] = {{"no remat", cp::none(), 3},
               {"nothing_saveable", cp::nothing_saveable(), 5},
               {"dots_with_no_batch_dims_saveable", cp::dots_with_no_batch_dims_saveable(), 1}};
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const TreeFn f = loss_and_grads(c.policy);
    const CompiledStep fused = jit(f).lower(args);
    const CompiledStep plain = jit(f, {.donate_argnums = {},
                                       .fuse_elementwise = true,
                                       .fuse_dot_bias = false,
                                       .overlap_collectives = true})
                                   .lower(args);
    CAPTURE(fused.graph().str());
    CHECK(ir::count_eqns(fused.graph(), lax::dot_general_bias_p) == c.fused);
    CHECK(ir::count_eqns(plain.graph(), lax::dot_general_bias_p) == 0);
    // Without the pass no bias is materialised either: a program reads it through its
    // broadcast, so the plain graph's bias add joins the elementwise work after the product.
    for (const CompiledStep* step : {&fused, &plain})
      for (const ir::Eqn& e : step->graph().eqns)
        CHECK(e.prim != &lax::broadcast_in_dim_p);
    // No more memory: relu's masks are still taken where the pre-activations are made (a
    // comparison joins the cluster of its operand's other reader), so the pre-activations do
    // not live on to the backward pass's selects. (The values' memory: the two graphs' scalar
    // literals differ.)
    const auto values = [](const CompiledStep& s) {
      return s.memory_analysis().peak_bytes - s.memory_analysis().constant_bytes;
    };
    CHECK(values(fused) <= values(plain));
    const std::vector<Tree> a = fused(args), b = plain(args);
    if (default_device().kind == DeviceKind::cpu) {
      CHECK(a[0].array().to_vector<float>() == b[0].array().to_vector<float>());
      testing::check_same_bits(a[1], b[1]);
    } else {
      // cuBLASLt may sum the epilogue's product in another order than cuBLAS the plain one.
      testing::check_close(testing::values(a[0].array()), testing::values(b[0].array()), 1e-5);
      const auto ga = a[1].flatten(), gb = b[1].flatten();
      for (std::size_t i = 0; i < ga.size(); ++i)
        testing::check_close(testing::values(ga[i].second), testing::values(gb[i].second), 1e-5);
    }
  }
}

TEST_CASE("fuse_dot_bias: a product and its recomputation are fused together or not at all") {
  // The layer also returns its product, so the forward product has a second reader and keeps
  // its own add; its recomputation in the backward pass (the same operands and params) then
  // keeps its add too, so that remat recomputes the forward pass's bits on every backend.
  const auto loss = [](bool return_product) {
    return [return_product](std::span<const Array> v) {
      const ArrayFn layer = checkpoint(
          [](std::span<const Array> in) {
            const Array d = matmul(in[0], in[1]);
            return std::vector<Array>{relu(d + in[2]), d};
          },
          cp::nothing_saveable());
      auto [value, g] = value_and_grad([&](const Array& w) {
        const std::vector<Array> out = layer(std::vector<Array>{v[0], w, v[2]});
        return return_product ? sum(out[0]) + sum(out[1]) : sum(out[0]);
      })(v[1]);
      return std::vector<Array>{value, g};
    };
  };
  const std::vector<AVal> avals{AVal{Shape{4, 3}, DType::f32}, AVal{Shape{3, 5}, DType::f32},
                                AVal{Shape{5}, DType::f32}};
  for (const bool return_product : {false, true}) {
    CAPTURE(return_product);
    ir::Graph g = make_graph(loss(return_product), avals);
    ir::inline_calls(g);
    ir::dce(g);
    const std::int64_t products = ir::count_eqns(g, lax::dot_general_p);
    const int fused = ir::fuse_dot_bias(g);
    g.verify();
    CAPTURE(g.str());
    CHECK(fused == (return_product ? 0 : 2));  // forward and recomputed, or neither
    CHECK(ir::count_eqns(g, lax::dot_general_p) + fused == products);
  }
}

TEST_CASE("fuse_dot_bias: leaves alone what the epilogue cannot take") {
  const auto fused_in = [](const ArrayFn& f, std::vector<AVal> avals) {
    ir::Graph g = make_graph(f, avals);
    const int n = ir::fuse_dot_bias(g);
    g.verify();
    return n;
  };
  const AVal x{Shape{4, 3}, DType::f32}, w{Shape{3, 5}, DType::f32};
  // The bias along the rhs free axis: fused.
  CHECK(fused_in(
            [](std::span<const Array> v) { return std::vector<Array>{matmul(v[0], v[1]) + v[2]}; },
            {x, w, AVal{Shape{5}, DType::f32}}) == 1);
  // A bias per row (along the lhs free axis) is no epilogue bias.
  CHECK(fused_in(
            [](std::span<const Array> v) {
              return std::vector<Array>{matmul(v[0], v[1]) +
                                        lax::broadcast_in_dim(v[2], Shape{4, 5}, {0})};
            },
            {x, w, AVal{Shape{4}, DType::f32}}) == 0);
  // A product that is also a result keeps its add.
  CHECK(fused_in(
            [](std::span<const Array> v) {
              const Array d = matmul(v[0], v[1]);
              return std::vector<Array>{d + v[2], d};
            },
            {x, w, AVal{Shape{5}, DType::f32}}) == 0);
  // bf16 rounds the product before the add: fused, it would round once.
  const AVal xh{Shape{4, 3}, DType::bf16}, wh{Shape{3, 5}, DType::bf16};
  CHECK(fused_in(
            [](std::span<const Array> v) { return std::vector<Array>{matmul(v[0], v[1]) + v[2]}; },
            {xh, wh, AVal{Shape{5}, DType::bf16}}) == 0);
  // bf16 operands with float32 results (preferred_element_type) neither.
  CHECK(fused_in(
            [](std::span<const Array> v) {
              return std::vector<Array>{lax::dot_general(v[0], v[1],
                                                         ir::DotDimensionNumbers{{1}, {0}, {}, {}},
                                                         DType::f32) +
                                        v[2]};
            },
            {xh, wh, AVal{Shape{5}, DType::f32}}) == 0);
  // Batched products (attention's) are not one GEMM with a bias.
  CHECK(fused_in(
            [](std::span<const Array> v) { return std::vector<Array>{matmul(v[0], v[1]) + v[2]}; },
            {AVal{Shape{2, 4, 3}, DType::f32}, AVal{Shape{2, 3, 5}, DType::f32},
             AVal{Shape{5}, DType::f32}}) == 0);
}

TEST_CASE("dot_general_bias: the shape rule names what it takes") {
  const Array x = Array::full(Shape{4, 3}, 1.0, DType::f32);
  const Array w = Array::full(Shape{3, 5}, 0.5, DType::f32);
  const ir::Params p{{"dimension_numbers", ir::DotDimensionNumbers{{1}, {0}, {}, {}}}};
  const Array good[] = {x, w, Array::full(Shape{5}, 2.0, DType::f32)};
  const Array y = ir::bind1(lax::dot_general_bias_p, good, p);
  CHECK(y.to_vector<float>() == std::vector<float>(20, 3.5f));
  const Array bad[] = {x, w, Array::full(Shape{4}, 2.0, DType::f32)};
  CHECK_THROWS_WITH_AS(ir::bind1(lax::dot_general_bias_p, bad, p),
                       doctest::Contains("the bias must be f32[5]"), ValueError);
}
