// Remat is judged by memory: an 8-layer width-512 MLP-shaped function (dense + bias + relu per
// layer) at batch 1024 (activations outweigh the gradients), each layer in its own checkpoint. Peak
// bytes during value_and_grad per policy, against what the residual report predicts; recomputed
// dot_generals per policy.
#include <doctest/doctest.h>

#include <algorithm>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "harness/finite_diff.hpp"
#include "harness/remat_stack.hpp"

using namespace flaxpp;
namespace cp = flaxpp::checkpoint_policies;

namespace {

constexpr std::int64_t kLayers = 8, kWidth = 512, kBatch = 1024;
constexpr std::int64_t kActivationBytes = kBatch * kWidth * 4;  // one (B, W) float32 activation

struct Run {
  std::int64_t peak = 0;  // bytes above what was alive before vjp (the arguments)
  std::int64_t residual_bytes = 0;
  // Residuals other than arguments and constants (those are alive anyway), from the residual
  // report.
  std::int64_t new_residual_bytes = 0;
  std::int64_t grad_bytes = 0;
  std::int64_t backward_dots = 0;
  std::vector<std::vector<float>> grads;
};

Run run(const PolicyPtr& policy) {
  std::vector<Array> params;  // w0, b0, w1, b1, ...
  for (std::int64_t l = 0; l < kLayers; ++l) {
    params.push_back(astype(
        testing::random_f64(Shape{kWidth, kWidth}, 10 + unsigned(l), -0.08, 0.08), DType::f32));
    params.push_back(
        astype(testing::random_f64(Shape{kWidth}, 50 + unsigned(l), -0.1, 0.1), DType::f32));
  }
  const Array x = astype(testing::random_f64(Shape{kBatch, kWidth}, 99), DType::f32);
  const ArrayFn loss = testing::remat_stack_loss(x, kLayers, policy);
  std::int64_t new_residuals = 0;
  for (const SavedResidual& r : saved_residuals(loss, params))
    if (r.kind != SavedResidual::Kind::argument && r.kind != SavedResidual::Kind::constant)
      new_residuals += r.aval.shape.size() * 4;
  Backend& dev = backend(default_device());
  const std::int64_t live0 = dev.memory_stats().live_bytes;
  dev.reset_peak_memory();
  Run out;
  out.new_residual_bytes = new_residuals;
  {
    VjpResult r = vjp(loss, params);
    out.residual_bytes = r.residual_bytes;
    out.backward_dots = ir::count_eqns(*r.backward_graph, lax::dot_general_p);
    const Array one = Array::full(Shape{}, 1.0, DType::f32);
    // As value_and_grad runs it: residuals are handed over and freed after their last use.
    const std::vector<Array> grads = r.backward_once(std::span<const Array>(&one, 1));
    for (const Array& gr : grads) {
      out.grad_bytes += gr.nbytes();
      out.grads.push_back(gr.to_vector<float>());
    }
  }
  out.peak = dev.memory_stats().peak_bytes - live0;
  return out;
}

}  // namespace

TEST_CASE(
    "remat memory: peak bytes order everything >= dots >= nothing, each near its prediction") {
  const Run everything = run(cp::everything_saveable());
  const Run dots = run(cp::dots_with_no_batch_dims_saveable());
  const Run nothing = run(cp::nothing_saveable());
  auto mib = [](std::int64_t bytes) { return static_cast<double>(bytes) / 1048576.0; };
  MESSAGE("peak MiB: everything ", mib(everything.peak), ", dots ", mib(dots.peak), ", nothing ",
          mib(nothing.peak), "; new residual MiB: ", mib(everything.new_residual_bytes), ", ",
          mib(dots.new_residual_bytes), ", ", mib(nothing.new_residual_bytes));
  CHECK(everything.peak >= dots.peak);
  CHECK(dots.peak > nothing.peak);
  // nothing_saveable keeps each layer's input activation (the first is the constant batch) and
  // the output for the loss's backward; the dots policy also keeps each layer's dot output.
  CHECK(nothing.new_residual_bytes == kLayers * kActivationBytes);
  CHECK(dots.new_residual_bytes == 2 * kLayers * kActivationBytes);
  // The prediction. The backward pass frees each layer's residuals as it produces that layer's
  // gradients, so for a stack of equal layers the live bytes move linearly from all residuals
  // to all gradients: the peak is max(residuals, gradients) plus the transient of one layer's
  // backward, which holds at least the activation cotangent flowing through it and at most
  // five activations (its recomputed or saved dot output, bias-added and relu output, and
  // the activation cotangents it consumes and produces). Weight cotangents are written
  // directly in their (in, out) layout, so they add nothing beyond the gradients.
  for (const Run* r : {&everything, &dots, &nothing}) {
    const auto base = static_cast<double>(std::max(r->new_residual_bytes, r->grad_bytes));
    CAPTURE(base);
    CHECK(static_cast<double>(r->peak) >= base + 1 * kActivationBytes);
    CHECK(static_cast<double>(r->peak) <= base + 5 * kActivationBytes);
  }
}

TEST_CASE("remat memory: recomputed dot_generals are exactly what each policy implies") {
  // Backward of each layer: 2 dots (weight and input cotangents), except the first layer's
  // input cotangent (x is not differentiated) = 2L - 1. nothing_saveable recomputes each
  // layer's dot, whose output the relu's backward needs: + L.
  CHECK(run(cp::dots_with_no_batch_dims_saveable()).backward_dots == 2 * kLayers - 1);
  CHECK(run(cp::dots_saveable()).backward_dots == 2 * kLayers - 1);
  CHECK(run(cp::nothing_saveable()).backward_dots == 3 * kLayers - 1);
  CHECK(run(nullptr).backward_dots == 2 * kLayers - 1);
}

TEST_CASE("remat memory: gradients agree across policies to rounding") {
  const Run base = run(nullptr);
  for (const PolicyPtr& p :
       {cp::everything_saveable(), cp::dots_saveable(), cp::nothing_saveable()}) {
    const Run r = run(p);
    REQUIRE(r.grads.size() == base.grads.size());
    for (std::size_t i = 0; i < r.grads.size(); ++i)
      CHECK(r.grads[i] == base.grads[i]);
  }
}
