// The transformer's CUDA paths beyond what the nn and backend suites cover when ctest reruns
// them on the GPU: the index kernels (take, scatter_add, iota) against the CPU bit for bit in
// every storage type and past 65536 blocks, and attention, the remat'd Block and a scan over
// remat'd Blocks (rows read and written by offset copies) on the GPU against the CPU (cuBLAS
// sums in another order: within 1e-4), and the fused attention primitive on the GPU against
// the CPU's kernel; cuDNN's fused attention (bfloat16) against the GPU's unfused arithmetic.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/lax_attention.hpp"
#include "flaxpp/nn/multi_head_attention.hpp"
#include "flaxpp/nn/remat.hpp"
#include "flaxpp/nn/scan.hpp"
#include "flaxpp/nn/transformer_block.hpp"
#include "flaxpp/ops/dot_product_attention.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "harness/cuda_parity.hpp"
#include "src/backend/cuda/cuda_eval.hpp"

using namespace flaxpp;
using testing::kNoGpu;

namespace {

// n ids in [0, rows), many repeated (a small vocabulary read by many tokens).
Array token_ids(std::int64_t n, std::int64_t rows) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7919 + i / 3) % rows);
  return Array::from_vector(v, Shape{n}, Device::cpu());
}

}  // namespace

TEST_CASE("CUDA parity: take, scatter_add and iota give the CPU's bits, 16-bit take included" *
          doctest::skip(kNoGpu)) {
  const Array table = testing::random_f32(Shape{97, 33}, 301);
  const Array idx = token_ids(1000, 97);
  testing::check_parity([](auto v) { return lax::take(v[0], v[1]); }, {table, idx}, 0);
  // Repeated rows summed in index order on both backends: the same bits.
  const Array updates = testing::random_f32(Shape{1000, 33}, 302);
  testing::check_parity([](auto v) { return lax::scatter_add(v[0], v[1], v[2]); },
                        {table, idx, updates}, 0);
  const Array table_i = astype(table * 100.0, DType::i32);
  testing::check_parity([](auto v) { return astype(lax::take(v[0], v[1]), DType::f32); },
                        {table_i, idx}, 0);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(dtype));
    const Array t = astype(table.to(Device::cuda(0)), dtype);
    CHECK(testing::values(lax::take(t, idx.to(Device::cuda(0)))) ==
          testing::values(astype(lax::take(table, idx), dtype)));
  }
  set_default_device(Device::cuda(0));  // iota has no operand: it runs on the default device
  const Array iota = lax::iota(DType::f32, Shape{37, 5}, 0);
  set_default_device(Device::cpu());
  CHECK(iota.device() == Device::cuda(0));
  CHECK(testing::values(iota) == testing::values(lax::iota(DType::f32, Shape{37, 5}, 0)));
  // Out-of-range ids are refused on the GPU too: the kernel records the id, and the error
  // comes at the next synchronisation with the host (here, reading the result).
  CHECK_THROWS_WITH_AS(
      lax::take(table.to(Device::cuda(0)),
                Array::from_vector(std::vector<std::int32_t>{3, 97}, Shape{2}, Device::cuda(0)))
          .to_vector<float>(),
      doctest::Contains("index 97 (element 1"), ValueError);
}

TEST_CASE("CUDA (large): take and scatter_add past 65536 blocks match the CPU" *
          doctest::skip(kNoGpu)) {
  const Array table = testing::random_f32(Shape{5000, 512}, 303);
  const Array idx = token_ids(40'000, 5000);  // 20.5M result elements
  testing::check_parity([](auto v) { return lax::take(v[0], v[1]); }, {table, idx}, 0);
  const Array updates = testing::random_f32(Shape{40'000, 512}, 304);
  testing::check_parity([](auto v) { return lax::scatter_add(v[0], v[1], v[2]); },
                        {table, idx, updates}, 0);
}

TEST_CASE("CUDA attention: causal multi-head attention with dropout matches the CPU" *
          doctest::skip(kNoGpu)) {
  const Array x = testing::random_f32(Shape{4, 16, 64}, 305);
  const nn::Model model(nn::MultiHeadDotProductAttention{.num_heads = 8, .dropout_rate = 0.2});
  const nn::AttentionArgs args{.mask = nn::make_causal_mask(zeros(Shape{4, 16}, DType::i32)),
                               .deterministic = false};
  const nn::Variables v = model.init(random::key(0), x, args);
  const nn::RngStreams rngs{{"dropout", random::key(1)}};
  testing::check_parity([&](auto in) { return model.apply_with_rngs(v, rngs, in[0], args); }, {x},
                        1e-4);
}

namespace {

// The gradients of sum(model(x)**2) with respect to `params`, computed on `device`.
template <class Model>
Tree grads_on(const Model& model, const Tree& params, const Array& x, Device device) {
  set_default_device(device);  // literals and the mask's iota join the device's graph
  const Tree p = tree_map(params, [&](const Array& a) { return a.to(device); });
  const Array xd = x.to(device);
  Tree g = value_and_grad([&](const Tree& q) {
             return sum(square(model.apply(nn::Variables{{"params", q}}, xd)));
           })(p)
               .second;
  set_default_device(Device::cpu());
  return g;
}

void check_grads_close(const Tree& got, const Tree& want) {
  for (const auto& [leaf, w] : want.flatten()) {
    const std::string& path = leaf;  // (CAPTURE cannot take a structured binding in clang)
    CAPTURE(path);
    const std::vector<double> g = testing::values(got.at(path).array()), e = testing::values(w);
    REQUIRE(g.size() == e.size());
    for (std::size_t j = 0; j < g.size(); ++j)
      CHECK(std::abs(g[j] - e[j]) <= 1e-4 * (std::abs(e[j]) + 1));
  }
}

}  // namespace

TEST_CASE("CUDA Block: the remat'd Block's gradients on the GPU match the CPU's" *
          doctest::skip(kNoGpu)) {
  const Array x = testing::random_f32(Shape{2, 32, 64}, 306);
  const nn::TransformerBlock block{.num_heads = 4, .mlp_dim = 128};
  const Tree params = nn::Model(block).init(random::key(2), x)["params"];
  const auto model = remat<nn::TransformerBlock>(
      checkpoint_policies::dots_with_no_batch_dims_saveable(), {}, false)(block);
  check_grads_close(grads_on(model, params, x, Device::cuda(0)),
                    grads_on(model, params, x, Device::cpu()));
}

TEST_CASE("CUDA scan: scan(remat(Block)) over 4 layers, its gradients on the GPU match the CPU's" *
          doctest::skip(kNoGpu)) {
  const Array x = testing::random_f32(Shape{2, 16, 32}, 307);
  const nn::TransformerBlock block{.num_heads = 4, .mlp_dim = 64};
  const auto stack = nn::scan(
      remat<nn::TransformerBlock>(checkpoint_policies::nothing_saveable(), {}, false)(block),
      {.length = 4});
  const Tree params = stack.init(random::key(3), x)["params"];
  check_grads_close(grads_on(stack, params, x, Device::cuda(0)),
                    grads_on(stack, params, x, Device::cpu()));
}

TEST_CASE("CUDA fused attention: dot_product_attention on the GPU matches the CPU's kernel" *
          doctest::skip(kNoGpu)) {
  // float32 with a bias and a mask: the GPU runs the primitive's unfused arithmetic (cuDNN's
  // fused attention takes neither), the CPU its tiled kernel. Grouped heads, a bias, a mask and
  // causality; the output and the gradients of sum(out * out) for query, key, value and bias.
  const Array q = testing::random_f32(Shape{2, 5, 4, 8}, 401);
  const Array k = testing::random_f32(Shape{2, 7, 2, 8}, 402);
  const Array v = testing::random_f32(Shape{2, 7, 2, 8}, 403);
  const Array bias = testing::random_f32(Shape{1, 4, 5, 7}, 404);
  const Array mask = greater(testing::random_f32(Shape{2, 1, 5, 7}, 405),
                             Array::full(Shape{}, -0.5, DType::f32, Device::cpu()));
  for (int result = 0; result < 5; ++result) {
    INFO("result " << result);
    testing::check_parity(
        [result](auto a) {
          const auto f = [&](std::span<const Array> x) {
            return std::vector<Array>{dot_product_attention(
                x[0], x[1], x[2], {.bias = x[3], .mask = a[4], .is_causal = true})};
          };
          const VjpResult r = vjp(f, a.first(4));
          if (result == 0) return r.outputs[0];
          return r.backward(std::vector<Array>{r.outputs[0]})[static_cast<std::size_t>(result - 1)];
        },
        {q, k, v, bias, mask}, 1e-4);
  }
}

TEST_CASE("CUDA cuDNN attention: bfloat16 flash attention matches the unfused arithmetic" *
          doctest::skip(kNoGpu)) {
  // Grouped heads (4 query heads on 2 key/value heads), S != T, H 64; with and without
  // is_causal: the output and the gradients for query, key and value, cuDNN's (where the build
  // has cuDNN's frontend) against the GPU's unfused arithmetic, within bfloat16's rounding.
  const Device gpu = Device::cuda(0);
  const auto bf16 = [&](Shape shape, unsigned seed) {
    return astype(testing::random_f32(shape, seed), DType::bf16).to(gpu);
  };
  const std::vector<Array> x{bf16(Shape{2, 64, 4, 64}, 411), bf16(Shape{2, 80, 2, 64}, 412),
                             bf16(Shape{2, 80, 2, 64}, 413)};
  const Array cotangent = bf16(Shape{2, 64, 4, 64}, 414);
  const bool has_kernel = lax::attention_kernel(DeviceKind::cuda) != nullptr;
  for (const bool causal : {false, true}) {
    INFO("is_causal: " << causal);
    const auto run = [&](bool use_cudnn) {
      cuda::set_use_cudnn(use_cudnn);
      const auto f = [&](std::span<const Array> a) {
        return std::vector<Array>{dot_product_attention(a[0], a[1], a[2], {.is_causal = causal})};
      };
      const VjpResult r = vjp(f, x);
      std::vector<std::vector<float>> results{
          astype(r.outputs[0], DType::f32).to(Device::cpu()).to_vector<float>()};
      for (const Array& g : r.backward(std::vector<Array>{cotangent}))
        results.push_back(astype(g, DType::f32).to(Device::cpu()).to_vector<float>());
      return results;
    };
    const std::int64_t runs0 = cuda::cudnn_attention_executions();
    const auto fused = run(true);
    const std::int64_t runs = cuda::cudnn_attention_executions() - runs0;
    const auto unfused = run(false);
    cuda::set_use_cudnn(true);
    if (has_kernel)
      CHECK_MESSAGE(runs == 2,
                    "cuDNN did not run the attention's forward and backward (see the "
                    "reason flaxpp printed on stderr)");
    else
      CHECK(runs == 0);
    for (std::size_t i = 0; i < fused.size(); ++i) {
      INFO("result " << i);
      float scale = 1;
      for (const float u : unfused[i])
        scale = std::max(scale, std::abs(u));
      for (std::size_t j = 0; j < fused[i].size(); ++j)
        REQUIRE(std::abs(fused[i][j] - unfused[i][j]) <= 2e-2f * scale);
    }
  }
}
