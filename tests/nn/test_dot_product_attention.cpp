// jax.nn.dot_product_attention: flaxpp's fused attention (implementation none) against XLA's
// arithmetic composed of primitives ("xla"), values and gradients; the unfused evaluation a
// device without a fused kernel runs (CUDA's) against the fused one; the memory the fused
// kernel holds; JAX's errors; MultiHeadDotProductAttention and the LM with the fused
// attention_fn against Flax's arithmetic.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "flaxpp/backend/cpu.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/ir/flops.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/lax_attention.hpp"
#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/nn/multi_head_attention.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/ops/dot_product_attention.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/ops/slicing.hpp"
#include "flaxpp/random/distributions.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/trace.hpp"
#include "flaxpp/transforms/vmap.hpp"
#include "src/ops/unfused_attention.hpp"

using namespace flaxpp;

namespace {

// One attention problem: sizes, the optional bias and mask shapes, causality.
struct Case {
  std::string name;
  std::int64_t B = 2, T = 5, S = 5, N = 2, K = 2, H = 4;
  Shape bias_shape{}, mask_shape{};  // rank 0: none
  bool is_causal = false;
  DType dtype = DType::f32;
};

struct Inputs {
  Array q, k, v, bias, mask;
};

// The case's operands, on `device` (the default device: the GPU where the suite reruns there).
Inputs inputs(const Case& c, std::uint32_t seed = 0, Device device = default_device()) {
  const random::Key key = random::key(seed);
  const auto part = [&](std::uint32_t i, const Shape& shape) {
    return astype(random::normal(random::fold_in(key, i), shape), c.dtype).to(device);
  };
  Inputs in{part(0, Shape{c.B, c.T, c.N, c.H}),
            part(1, Shape{c.B, c.S, c.K, c.H}),
            part(2, Shape{c.B, c.S, c.K, c.H}),
            {},
            {}};
  if (c.bias_shape.rank() != 0) in.bias = part(3, c.bias_shape);
  // About a quarter of the positions masked, never a whole row (the first key stays).
  if (c.mask_shape.rank() != 0) {
    const Array draw = random::uniform(random::fold_in(key, 4), c.mask_shape);
    const Array key_position = lax::iota(DType::i32, c.mask_shape, 3);
    const Array first = equal(key_position, lax::zeros_like(key_position));
    in.mask = where(first, first, greater(draw, lax::full_like(draw, 0.25))).to(device);
  }
  return in;
}

std::vector<Case> cases() {
  return {
      {.name = "plain"},
      {.name = "grouped query heads", .N = 4, .K = 2},
      {.name = "multi-query, longer keys", .T = 3, .S = 7, .N = 3, .K = 1},
      {.name = "causal", .T = 6, .S = 6, .is_causal = true},
      {.name = "causal, more keys than queries", .T = 3, .S = 70, .is_causal = true},
      {.name = "bias per head and position", .bias_shape = Shape{1, 2, 5, 5}},
      {.name = "bias per example and key", .bias_shape = Shape{2, 1, 1, 5}},
      {.name = "mask and causal",
       .T = 6,
       .S = 6,
       .mask_shape = Shape{2, 1, 6, 6},
       .is_causal = true},
      {.name = "mask, bias, grouped, two tiles of keys",
       .T = 4,
       .S = 130,
       .N = 4,
       .K = 2,
       .bias_shape = Shape{2, 4, 4, 130},
       .mask_shape = Shape{1, 4, 4, 130}},
      {.name = "float64",
       .T = 4,
       .S = 6,
       .bias_shape = Shape{1, 1, 4, 6},
       .is_causal = true,
       .dtype = DType::f64},
  };
}

DotProductAttentionOptions options(const Case& c, const Inputs& in,
                                   std::optional<std::string> implementation) {
  return {.bias = in.bias,
          .mask = in.mask,
          .is_causal = c.is_causal,
          .implementation = std::move(implementation)};
}

// dot_product_attention of the case with `implementation`, and its gradients with respect to
// query, key, value and the bias of sum(out * weights).
std::vector<Array> value_and_grads(const Case& c, const Inputs& in,
                                   std::optional<std::string> implementation) {
  const Array weights =
      astype(random::normal(random::key(7), Shape{c.B, c.T, c.N, c.H}), c.dtype).to(in.q.device());
  std::vector<Array> primals{in.q, in.k, in.v};
  if (in.bias.valid()) primals.push_back(in.bias);
  const VjpResult r = vjp(
      [&](std::span<const Array> a) {
        DotProductAttentionOptions o = options(c, in, implementation);
        if (a.size() > 3) o.bias = a[3];
        return std::vector<Array>{dot_product_attention(a[0], a[1], a[2], o)};
      },
      primals);
  std::vector<Array> out{r.outputs[0]};
  for (const Array& g : r.backward(std::vector<Array>{weights}))
    out.push_back(g);
  return out;
}

// Element by element within `rtol` of the larger magnitude, or `atol`.
void check_near(const Array& got, const Array& want, double rtol, double atol,
                const std::string& what) {
  INFO(what);
  REQUIRE(got.aval() == want.aval());
  const auto a = astype(got, DType::f64).to_vector<double>();
  const auto b = astype(want, DType::f64).to_vector<double>();
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst =
        std::max(worst, std::abs(a[i] - b[i]) - rtol * std::max(std::abs(a[i]), std::abs(b[i])));
  CHECK(worst <= atol);
}

}  // namespace

TEST_CASE(
    "dot_product_attention: the fused attention gives XLA's arithmetic, values and gradients") {
  for (const Case& c : cases()) {
    INFO(c.name);
    const Inputs in = inputs(c);
    const std::vector<Array> fused = value_and_grads(c, in, std::nullopt);
    const std::vector<Array> xla = value_and_grads(c, in, "xla");
    const bool f64 = c.dtype == DType::f64;
    // The softmax runs in float32 for float64 operands too, as XLA's does.
    const double rtol = f64 ? 1e-6 : 2e-5, atol = f64 ? 1e-7 : 2e-6;
    const char* names[] = {"out", "dquery", "dkey", "dvalue", "dbias"};
    REQUIRE(fused.size() == xla.size());
    for (std::size_t i = 0; i < fused.size(); ++i)
      check_near(fused[i], xla[i], rtol, atol, names[i]);
  }
}

TEST_CASE("dot_product_attention: the unfused evaluation (CUDA's) agrees with the fused kernel") {
  for (const Case& c : cases()) {
    INFO(c.name);
    const Inputs in = inputs(c);
    std::vector<Array> ops{in.q, in.k, in.v};
    if (in.bias.valid()) ops.push_back(in.bias);
    if (in.mask.valid()) ops.push_back(in.mask);
    const ir::Params params{{"scale", 0.5},
                            {"is_causal", c.is_causal},
                            {"bias", in.bias.valid()},
                            {"mask", in.mask.valid()}};
    const std::vector<Array> fused = ir::bind(lax::dot_product_attention_p, ops, params);
    const std::vector<Array> unfused = attention_detail::unfused_forward(ops, params);
    const double rtol = 2e-5, atol = 2e-6;
    check_near(unfused[0], fused[0], rtol, atol, "out");
    check_near(unfused[1], fused[1], rtol, atol, "lse");
    std::vector<Array> bwd_ops = ops;
    bwd_ops.push_back(fused[0]);
    bwd_ops.push_back(fused[1]);
    bwd_ops.push_back(astype(random::normal(random::key(9), fused[0].shape()), c.dtype));
    const std::vector<Array> grads = ir::bind(lax::dot_product_attention_bwd_p, bwd_ops, params);
    const std::vector<Array> unfused_grads = attention_detail::unfused_backward(bwd_ops, params);
    REQUIRE(grads.size() == unfused_grads.size());
    for (std::size_t i = 0; i < grads.size(); ++i)
      check_near(unfused_grads[i], grads[i], rtol, atol, "gradient " + std::to_string(i));
  }
}

TEST_CASE("dot_product_attention: rank-3 inputs, a given scale, jit and remat agree") {
  const Case c{.name = "jit", .T = 6, .S = 6, .mask_shape = Shape{2, 1, 6, 6}, .is_causal = true};
  const Inputs in = inputs(c);
  DotProductAttentionOptions o = options(c, in, std::nullopt);
  o.scale = 0.3;
  const Array eager = dot_product_attention(in.q, in.k, in.v, o);
  const auto jitted = jit([&](const Array& q, const Array& k, const Array& v) {
    return dot_product_attention(q, k, v, o);
  });
  CHECK(jitted(in.q, in.k, in.v).to_vector<float>() == eager.to_vector<float>());
  o.implementation = "xla";
  check_near(eager, dot_product_attention(in.q, in.k, in.v, o), 2e-5, 2e-6, "scale 0.3");

  // Without the batch axis: the same as a batch of one.
  const auto first = [](const Array& x) {
    const std::vector<std::int64_t>& d = x.shape().dims();
    return reshape(slice(x, {{0, 1}}), {d[1], d[2], d[3]});
  };
  const Array one =
      dot_product_attention(first(in.q), first(in.k), first(in.v), {.is_causal = true});
  const Array batched = dot_product_attention(in.q, in.k, in.v, {.is_causal = true});
  CHECK(one.shape() == first(in.q).shape());
  CHECK(one.to_vector<float>() == first(batched).to_vector<float>());

  // Differentiated through a checkpoint that saves nothing: the same gradients.
  const auto loss = [&](bool remat) {
    return grad([&, remat](const Array& q) {
      const ArrayFn f = [&](std::span<const Array> a) {
        return std::vector<Array>{sum(dot_product_attention(a[0], in.k, in.v, o))};
      };
      const Array qs[] = {q};
      return remat ? checkpoint(f, checkpoint_policies::nothing_saveable())(qs)[0] : f(qs)[0];
    })(in.q);
  };
  o.implementation.reset();
  CHECK(loss(true).to_vector<float>() == loss(false).to_vector<float>());
}

TEST_CASE("dot_product_attention: the CPU's fused kernel holds no (B, N, T, S) scores") {
  const Case c{
      .name = "memory", .B = 1, .T = 256, .S = 256, .N = 2, .K = 2, .H = 8, .is_causal = true};
  const Inputs in = inputs(c, 0, Device::cpu());
  Backend& be = backend(Device::cpu());
  const std::int64_t out_bytes = c.B * c.T * c.N * c.H * 4, lse_bytes = c.B * c.N * c.T * 4;
  const std::int64_t scores_bytes = c.B * c.N * c.T * c.S * 4;
  const auto peak_of = [&](std::optional<std::string> implementation) {
    const std::int64_t before = be.memory_stats().live_bytes;
    be.reset_peak_memory();
    const Array out = dot_product_attention(in.q, in.k, in.v,
                                            {.is_causal = true, .implementation = implementation});
    return be.memory_stats().peak_bytes - before;
  };
  // The fused primitive allocates its two results and nothing else.
  CHECK(peak_of(std::nullopt) == out_bytes + lse_bytes);
  CHECK(peak_of("xla") >= scores_bytes);
}

TEST_CASE("dot_product_attention: the products' FLOPs are counted for a remat plan") {
  const Case c{.name = "flops", .B = 2, .T = 3, .S = 5, .N = 4, .K = 2, .H = 8};
  const Inputs in = inputs(c);
  const AVal avals[] = {in.q.aval(), in.k.aval(), in.v.aval()};
  const ir::Graph graph = make_graph(
      [&](std::span<const Array> a) {
        return std::vector<Array>{dot_product_attention(a[0], a[1], a[2])};
      },
      avals);
  REQUIRE(graph.eqns.size() == 1);
  CHECK(ir::flops(graph) == 4 * c.B * c.N * c.T * c.S * c.H);
}

TEST_CASE("dot_product_attention: bad inputs are errors in JAX's words") {
  const Case c{.name = "errors", .N = 3, .K = 2};
  const Inputs in = inputs(c);
  CHECK_THROWS_WITH_AS(dot_product_attention(in.q, in.k, in.v),
                       doctest::Contains("The number of query heads must be a multiple of "
                                         "key/value heads, but got 3 vs 2"),
                       ValueError);
  const Inputs ok = inputs(Case{});
  CHECK_THROWS_WITH_AS(dot_product_attention(ok.q, ok.k, ok.v, {.mask = ones(Shape{1, 1, 5, 5})}),
                       doctest::Contains("mask dtype should be bool, but got float32"), ValueError);
  // implementation "cudnn": a build without cuDNN's frontend says so; one with it refuses
  // float32 (cuDNN's fused attention takes 16-bit operands), a bias, and operands on the CPU.
  if (lax::attention_kernel(DeviceKind::cuda) == nullptr) {
    CHECK_THROWS_WITH_AS(
        dot_product_attention(ok.q, ok.k, ok.v, {.implementation = "cudnn"}),
        doctest::Contains("needs a build of flaxpp with CUDA, cuDNN and cuDNN's frontend"),
        ValueError);
  } else {
    CHECK_THROWS_WITH_AS(dot_product_attention(ok.q, ok.k, ok.v, {.implementation = "cudnn"}),
                         doctest::Contains("takes float16 or bfloat16 operands, but got float32"),
                         ValueError);
    const auto on_cpu = [](const Array& x) { return astype(x, DType::bf16).to(Device::cpu()); };
    const Array q = on_cpu(ok.q), k = on_cpu(ok.k), v = on_cpu(ok.v);
    CHECK_THROWS_WITH_AS(dot_product_attention(
                             q, k, v, {.bias = ones(Shape{1, 1, 5, 5}), .implementation = "cudnn"}),
                         doctest::Contains("takes no bias or mask"), ValueError);
    CHECK_THROWS_WITH_AS(dot_product_attention(q, k, v, {.implementation = "cudnn"}),
                         doctest::Contains("runs on a GPU, but query is on"), ValueError);
  }
  CHECK_THROWS_WITH_AS(dot_product_attention(ok.q, ok.k, ok.v, {.implementation = "flash"}),
                       doctest::Contains("Unsupported implementation option: flash"), ValueError);
  CHECK_THROWS_WITH_AS(dot_product_attention(ok.q, ok.k, ok.v, {.bias = ones(Shape{1, 3, 5, 5})}),
                       doctest::Contains("does not broadcast to (B, N, T, S)"), ValueError);
  CHECK_THROWS_WITH_AS(dot_product_attention(ok.q, ok.k, reshape(ok.v, {2, 5, 1, 8})),
                       doctest::Contains("value shape should be [2,5,2,4]: but got [2,5,1,8]"),
                       ValueError);
}

TEST_CASE("MultiHeadDotProductAttention and the LM with the fused attention_fn: Flax's values") {
  // The same params; Flax's arithmetic against jax.nn's fused attention, to rounding.
  const Array x = random::normal(random::key(3), Shape{2, 6, 8});
  const Array mask = nn::make_causal_mask(zeros(Shape{2, 6}, DType::i32));
  const nn::MultiHeadDotProductAttention flax{.num_heads = 2};
  nn::MultiHeadDotProductAttention fused = flax;
  fused.attention_fn = nn::jax_attention_fn();
  const nn::Variables v = nn::Model(flax).init(random::key(0), x, nn::AttentionArgs{.mask = mask});
  check_near(nn::Model(fused).apply(v, x, nn::AttentionArgs{.mask = mask}),
             nn::Model(flax).apply(v, x, nn::AttentionArgs{.mask = mask}), 2e-5, 2e-6, "MHA");

  nn::LanguageModel lm{.vocab = 19,
                       .features = 8,
                       .num_layers = 2,
                       .num_heads = 2,
                       .mlp_dim = 16,
                       .max_len = 6,
                       .policy = checkpoint_policies::nothing_saveable()};
  const Array tokens =
      astype(lax::iota(DType::i32, Shape{2, 6}, 1) * 3.0 + lax::iota(DType::i32, Shape{2, 6}, 0),
             DType::i32);
  const Tree params = nn::Model(lm).init(random::key(1), tokens)["params"];
  const auto loss_and_grads = [&](const nn::LanguageModel& model) {
    return value_and_grad([&](const Tree& p) {
      return sum(square(nn::Model(model).apply(nn::Variables{{"params", p}}, tokens)));
    })(params);
  };
  const auto [flax_loss, flax_grads] = loss_and_grads(lm);
  lm.attention_fn = nn::jax_attention_fn();
  const auto [fused_loss, fused_grads] = loss_and_grads(lm);
  check_near(fused_loss, flax_loss, 1e-5, 0, "LM loss");
  const std::vector<Array> a = Tree(fused_grads).leaves(), b = Tree(flax_grads).leaves();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    check_near(a[i], b[i], 1e-4, 1e-4, "LM gradient " + std::to_string(i));

  // jax.nn's attention has no dropout: asking for it is an error, not a silent skip.
  nn::MultiHeadDotProductAttention dropping = fused;
  dropping.dropout_rate = 0.1;
  dropping.deterministic = false;
  CHECK_THROWS_WITH_AS(nn::Model(dropping).init(random::key(0), x),
                       doctest::Contains("has no dropout"), ValueError);
}

TEST_CASE("dot_product_attention: the CPU kernel's bits do not depend on the thread count") {
  const Case c{.name = "threads",
               .T = 9,
               .S = 9,
               .N = 4,
               .K = 2,
               .bias_shape = Shape{2, 4, 9, 9},
               .is_causal = true};
  const Inputs in = inputs(c, 0, Device::cpu());
  const auto run = [&](int threads) {
    const int before = cpu::num_threads();
    cpu::set_num_threads(threads);
    std::vector<Array> r = value_and_grads(c, in, std::nullopt);
    cpu::set_num_threads(before);
    return r;
  };
  const std::vector<Array> one = run(1), two = run(2);
  for (std::size_t i = 0; i < one.size(); ++i)
    CHECK(one[i].to_vector<float>() == two[i].to_vector<float>());
}

TEST_CASE("dot_product_attention under vmap: every example as if alone, with its gradients") {
  // Per example: the output and the gradients of sum(out * out) for query, key, value, bias.
  const Case c{.name = "vmap", .T = 4, .S = 6, .N = 4, .K = 2, .is_causal = true};
  const ArrayFn per_example = [&](std::span<const Array> a) {
    const VjpResult r = vjp(
        [&](std::span<const Array> x) {
          return std::vector<Array>{dot_product_attention(
              x[0], x[1], x[2], {.bias = x[3], .mask = a[4], .is_causal = true})};
        },
        a.first(4));
    std::vector<Array> out{r.outputs[0]};
    for (const Array& g : r.backward(std::vector<Array>{r.outputs[0]}))
      out.push_back(g);
    return out;
  };
  const std::int64_t V = 3;
  const auto stacked = [&](const Shape& one, std::uint32_t seed) {
    std::vector<std::int64_t> dims{V};
    for (const std::int64_t d : one.dims())
      dims.push_back(d);
    return random::normal(random::key(seed), Shape(dims));
  };
  const Shape q_shape{c.B, c.T, c.N, c.H}, kv_shape{c.B, c.S, c.K, c.H};
  const Array q = stacked(q_shape, 1), k = stacked(kv_shape, 2), v = stacked(kv_shape, 3);
  const Array mask = greater(random::uniform(random::key(5), Shape{c.B, 1, c.T, c.S}),
                             lax::full_like(random::uniform(random::key(5), Shape{1}), -1.0));
  for (const bool bias_mapped : {false, true})
    for (const Shape& bias_shape : {Shape{1, c.N, c.T, c.S}, Shape{c.B, 1, 1, c.S}}) {
      INFO("bias " << bias_shape << (bias_mapped ? ", mapped" : ", shared"));
      const Array bias =
          bias_mapped ? stacked(bias_shape, 4) : random::normal(random::key(4), bias_shape);
      const std::vector<Array> batched = vmap(
          per_example, {.in_axes = {0, 0, 0, bias_mapped ? MapAxis(0) : not_mapped, not_mapped},
                        .out_axes = {}})(std::vector<Array>{q, k, v, bias, mask});
      for (std::int64_t e = 0; e < V; ++e) {
        const auto at = [&](const Array& x) {
          std::vector<std::int64_t> dims = x.shape().dims();
          dims.erase(dims.begin());
          return reshape(slice(x, {{e, e + 1}}), dims);
        };
        const std::vector<Array> one = per_example(
            std::vector<Array>{at(q), at(k), at(v), bias_mapped ? at(bias) : bias, mask});
        for (std::size_t i = 0; i < one.size(); ++i)
          check_near(at(batched[i]), one[i], 1e-6, 1e-7, "result " + std::to_string(i));
      }
    }
}
