// A scan's memory, planned iteration by iteration (scan's memory model): the peak that
// memory_analysis predicts for a jitted function with scans is exact, and equals the peak the
// CPU backend's allocator measures, forward, with gradients, and for the transformer stack's
// train step under every remat policy, with xs rows read in place and copied.
#include <doctest/doctest.h>

#include <vector>

#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/scan.hpp"
#include "harness/finite_diff.hpp"
#include "harness/planned_peak.hpp"
#include "harness/stack_train_step.hpp"

using namespace flaxpp;
namespace cp = flaxpp::checkpoint_policies;

TEST_CASE("memory analysis: a scan's peak is planned exactly, forward and with its gradient") {
  const Array ws = astype(testing::random_f64(Shape{6, 32, 32}, 1), DType::f32);
  const Array bs = astype(testing::random_f64(Shape{6, 32}, 4), DType::f32);
  const Array x = astype(testing::random_f64(Shape{16, 32}, 2), DType::f32);
  for (const bool reverse : {false, true}) {
    CAPTURE(reverse);
    // A carry, two xs rows per layer (a weight's, read in place, and a bias's of 128 bytes,
    // copied), a ys row per layer.
    const auto loss = [reverse, &bs](const Array& w, const Array& h0) {
      const ScanResult r = scan(
          [](std::span<const Array> c, std::span<const Array> xs) {
            const Array h = tanh(matmul(c[0], xs[0]) + xs[1]);
            return ScanResult{{h}, {sum(h)}};
          },
          std::vector<Array>{h0}, std::vector<Array>{w, bs}, std::nullopt, reverse);
      return add(sum(r.carry[0]), sum(r.ys[0]));
    };
    const Jitted forward = jit([&](std::span<const Tree> a) {
      return std::vector<Tree>{Tree(loss(a[0].array(), a[1].array()))};
    });
    const std::vector<Tree> args{Tree(ws), Tree(x)};
    testing::check_planned_peak(forward.lower(args), args);
    const Jitted with_grad = jit([&](std::span<const Tree> a) {
      auto [value, grad] =
          value_and_grad([&](const Tree& w) { return loss(w.array(), a[1].array()); })(a[0]);
      return std::vector<Tree>{Tree(value), grad};
    });
    testing::check_planned_peak(with_grad.lower(args), args);
  }
}

TEST_CASE(
    "memory analysis: the train step of scan(remat(Block)) is planned exactly under every "
    "policy, its donated state included") {
  const Array x = astype(testing::random_f64(Shape{2, 8, 16}, 3), DType::f32);
  for (const PolicyPtr& policy :
       {cp::none(), cp::nothing_saveable(), cp::dots_saveable(),
        cp::dots_with_no_batch_dims_saveable(), cp::everything_saveable()}) {
    CAPTURE(policy->str());
    const testing::StackTrainStep t = testing::stack_train_step(
        {.num_layers = 3, .num_heads = 2, .mlp_dim = 32, .policy = policy}, x);
    testing::check_planned_peak(t.step.lower(t.args), t.args, {0, 1});
  }
}
