// Buffer assignment: the arena's layout (two buffers held during a common equation never share
// a byte; offsets aligned; the greedy fit on a hand case) and the jitted step that follows it:
// every temporary in the arena, so that a call allocates only the arena and what the plan keeps
// apart; the planned peak measured; the values bit for bit those of the run without a plan;
// a result that a primitive hands out from its operand (checkpoint_name) moved into its slot;
// a scan's ys rows written in place into its stacked results; the step's constants counted.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/nn/remat.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/losses.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/buffer_assignment.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/eval_graph.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/scan.hpp"
#include "harness/finite_diff.hpp"
#include "harness/planned_peak.hpp"
#include "harness/tree_bits.hpp"

using namespace flaxpp;
namespace cp = flaxpp::checkpoint_policies;

namespace {

struct Assigned {
  PlannedArena arena;
  std::vector<std::int64_t> offset;
};

Assigned assigned(const std::vector<BufferLife>& lives) {
  Assigned a;
  a.offset.assign(lives.size(), -1);
  a.arena = assign_offsets(lives, a.offset);
  return a;
}

// The equations' results that the plan keeps out of the arena (each a call's allocation).
std::int64_t kept_apart(const ir::Graph& g, const BufferAssignment& a) {
  std::int64_t n = 0;
  for (const ir::Eqn& e : g.eqns)
    for (const ir::VarId v : e.outputs)
      if (a.buffer_of[static_cast<std::size_t>(v)] == v && a.offset_of(v) < 0) ++n;
  return n;
}

// A jitted scan of `body` over `length` rows of f32[64], from a carry of f32[8,64] (seeded),
// called once: the call's results and allocations.
struct ScannedStep {
  Array init, xs;
  CompiledStep compiled;
  std::vector<Tree> out;
  std::int64_t allocations = 0;
};

ScannedStep scanned_step(const ScanBody& body, std::int64_t length) {
  const Array init = astype(testing::random_f64(Shape{8, 64}, 9, -1.0, 1.0), DType::f32);
  const Array xs = astype(testing::random_f64(Shape{length, 64}, 10, -1.0, 1.0), DType::f32);
  const auto f = [&](std::span<const Tree> a) {
    const ScanResult r =
        scan(body, std::vector<Array>{a[0].array()}, std::vector<Array>{a[1].array()});
    return std::vector<Tree>{Tree(r.carry[0]), Tree(r.ys[0])};
  };
  CompiledStep compiled = jit(f).lower(std::vector<Tree>{Tree(init), Tree(xs)});
  Backend& be = backend(Device::cpu());
  const std::int64_t before = be.memory_stats().total_allocations;
  std::vector<Tree> out = compiled({Tree(init), Tree(xs)});
  const std::int64_t allocations = be.memory_stats().total_allocations - before;
  return {init, xs, std::move(compiled), std::move(out), allocations};
}

}  // namespace

TEST_CASE("assign_offsets: buffers held during a common equation never share a byte") {
  // By hand: a and c are never held together and share offset 0; b, held with both, goes
  // above them. 1000 bytes take 1024 (slots start at multiples of 256).
  const Assigned hand = assigned({{0, 1000, 0, 1}, {1, 1000, 1, 2}, {2, 1000, 2, 3}});
  CHECK(hand.offset == std::vector<std::int64_t>{0, 1024, 0});
  CHECK(hand.arena.bytes == 2048);
  CHECK(hand.arena.first == 0);
  CHECK(hand.arena.last == 3);

  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<BufferLife> lives;
    for (ir::VarId v = 0; v < 150; ++v) {
      const auto first = static_cast<std::ptrdiff_t>(rng() % 100);
      lives.push_back({v, 1 + static_cast<std::int64_t>(rng() % 5000), first,
                       first + static_cast<std::ptrdiff_t>(rng() % 20)});
    }
    const Assigned a = assigned(lives);
    CAPTURE(round);
    std::int64_t most_held = 0;  // the least any layout needs
    for (std::ptrdiff_t t = 0; t < 120; ++t) {
      std::int64_t held = 0;
      for (const BufferLife& b : lives)
        if (b.first <= t && t <= b.last) held += b.bytes;
      most_held = std::max(most_held, held);
    }
    CHECK(a.arena.bytes >= most_held);
    int clashes = 0;
    for (const BufferLife& x : lives) {
      const std::int64_t at = a.offset[static_cast<std::size_t>(x.var)];
      CHECK(at % BufferAssignment::kAlignment == 0);
      CHECK(at + x.bytes <= a.arena.bytes);
      for (const BufferLife& y : lives) {
        if (y.var <= x.var || y.first > x.last || x.first > y.last) continue;
        const std::int64_t other = a.offset[static_cast<std::size_t>(y.var)];
        if (at < other + y.bytes && other < at + x.bytes) ++clashes;
      }
    }
    CHECK(clashes == 0);
  }
}

TEST_CASE("jit: a step's temporaries live in one arena, where the plan puts them") {
  if (default_device() != Device::cpu()) return;  // CUDA's pool and recording: tests/cuda
  const nn::MLP mlp{.features = {64, 64, 10}};
  const Array x = astype(testing::random_f64(Shape{16, 32}, 3, -1.0, 1.0), DType::f32);
  const Array labels = Array::from_vector<std::int32_t>(
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5}, Shape{16}, Device::cpu());
  const Tree params = nn::Model(mlp).init(random::key(1), x)["params"];
  for (const PolicyPtr& policy : {cp::none(), PolicyPtr{cp::nothing_saveable()}}) {
    CAPTURE(policy->str());
    const auto loss_and_grads = [&](std::span<const Tree> a) {
      const auto loss_of = [&](const Tree& p) {
        const Array logits = remat<nn::MLP>(policy)(mlp).apply({{"params", p}}, a[1].array());
        return mean(optim::softmax_cross_entropy_with_integer_labels(logits, a[2].array()));
      };
      auto [loss, grads] = value_and_grad(loss_of)(a[0]);
      return std::vector<Tree>{Tree(loss), grads};
    };
    const CompiledStep compiled =
        jit(loss_and_grads).lower(std::vector<Tree>{params, Tree(x), Tree(labels)});
    const MemoryAnalysis& m = compiled.memory_analysis();
    const BufferAssignment& a = m.buffers;
    CAPTURE(m.str());
    REQUIRE(a.arenas.size() == 1);
    std::int64_t placed = 0;
    for (const std::int64_t at : a.offset)
      placed += at >= 0 ? 1 : 0;
    CHECK(placed > 10);
    // A call allocates the arena and the buffers the plan keeps apart (the loss, the
    // gradients), nothing for each temporary.
    Backend& be = backend(Device::cpu());
    for (int call = 0; call < 2; ++call) {
      const std::int64_t before = be.memory_stats().total_allocations;
      const std::vector<Tree> out = compiled({params, Tree(x), Tree(labels)});
      CHECK(be.memory_stats().total_allocations - before == 1 + kept_apart(compiled.graph(), a));
      // The same values as the graph run without a plan.
      std::vector<Array> leaves = params.leaves();
      leaves.push_back(x);
      leaves.push_back(labels);
      const std::vector<Array> unplanned = eval_graph(compiled.graph(), std::move(leaves));
      const std::vector<Array> planned = out[1].leaves();
      testing::check_same_values(out[0].array(), unplanned[0]);
      for (std::size_t k = 0; k < planned.size(); ++k)
        testing::check_same_values(planned[k], unplanned[k + 1]);
    }
    testing::check_planned_peak(compiled, {params, Tree(x), Tree(labels)});
  }
}

TEST_CASE("jit: a result a primitive hands out from its operand is moved into its own slot") {
  if (default_device() != Device::cpu()) return;
  // checkpoint_name returns its operand's buffer; the plan gives its result a slot of its own,
  // read after the operand's last use, when the operand's slot holds another value.
  const auto f = [](std::span<const Tree> a) {
    const Array h = exp(a[0].array());
    const Array named = checkpoint_name(h, "h");
    const Array later = tanh(named * 2.0f) + sin(named);
    return std::vector<Tree>{Tree(sum(later * named))};
  };
  const Array x = astype(testing::random_f64(Shape{64, 64}, 5, -1.0, 1.0), DType::f32);
  const CompiledStep compiled = jit(f).lower(std::vector<Tree>{Tree(x)});
  CAPTURE(compiled.memory_analysis().str());
  const std::vector<Array> unplanned = eval_graph(compiled.graph(), std::vector<Array>{x});
  testing::check_same_values(compiled({Tree(x)})[0].array(), unplanned[0]);
  testing::check_planned_peak(compiled, {Tree(x)});
}

TEST_CASE("jit: an equation's results take their own slots, whatever their order") {
  if (default_device() != Device::cpu()) return;
  // One fused program makes h = 2·exp(x), a result of the step (kept apart), and tanh(h), a
  // temporary the product reads (a slot), both of one size: each allocation must go where the
  // plan has its result, with nothing moved or allocated besides.
  const Array w = astype(testing::random_f64(Shape{64, 64}, 11, -0.2, 0.2), DType::f32);
  const auto f = [&](std::span<const Tree> a) {
    const Array h = exp(a[0].array()) * 2.0f;
    return std::vector<Tree>{Tree(h), Tree(matmul(tanh(h), w))};
  };
  const Array x = astype(testing::random_f64(Shape{64, 64}, 12, -1.0, 1.0), DType::f32);
  const CompiledStep compiled = jit(f).lower(std::vector<Tree>{Tree(x)});
  const BufferAssignment& a = compiled.memory_analysis().buffers;
  CAPTURE(compiled.memory_analysis().str());
  bool mixed = false;  // the case: an equation with a result apart before one in a slot
  for (const ir::Eqn& e : compiled.graph().eqns)
    if (e.outputs.size() == 2 && a.offset_of(e.outputs[0]) < 0 && a.offset_of(e.outputs[1]) >= 0)
      mixed = true;
  REQUIRE(mixed);
  Backend& be = backend(Device::cpu());
  const std::int64_t before = be.memory_stats().total_allocations;
  const std::vector<Tree> out = compiled({Tree(x)});
  CHECK(be.memory_stats().total_allocations - before == 1 + kept_apart(compiled.graph(), a));
  const std::vector<Array> unplanned = eval_graph(compiled.graph(), std::vector<Array>{x});
  testing::check_same_values(out[0].array(), unplanned[0]);
  testing::check_same_values(out[1].array(), unplanned[1]);
  testing::check_planned_peak(compiled, {Tree(x)});
}

TEST_CASE("jit: a scan's body runs on a plan of its own, iteration by iteration") {
  if (default_device() != Device::cpu()) return;
  // Each iteration makes three products and a tanh before its carry and its row of ys: without
  // a plan, each of them would be an allocation of its own per iteration.
  constexpr std::int64_t kLength = 6;
  const Array w = astype(testing::random_f64(Shape{64, 64}, 8, -0.2, 0.2), DType::f32);
  const ScannedStep s = scanned_step(
      [&](std::span<const Array> c, std::span<const Array> x) {
        const Array h1 = matmul(c[0], w);
        const Array h2 = matmul(tanh(h1), w);
        const Array h3 = matmul(h2 * h1, w);
        return ScanResult{{h3 + x[0]}, {sum(h2, Axes{1})}};
      },
      kLength);
  CAPTURE(s.compiled.memory_analysis().str());
  // Per iteration: the body's arena, its carry and its row of ys (32 bytes: copied in); and
  // the stacked ys once.
  CHECK(s.allocations <= 1 + kLength * 3);
  const std::vector<Array> unplanned =
      eval_graph(s.compiled.graph(), std::vector<Array>{s.init, s.xs});
  testing::check_same_values(s.out[0].array(), unplanned[0]);
  testing::check_same_values(s.out[1].array(), unplanned[1]);
  testing::check_planned_peak(s.compiled, {Tree(s.init), Tree(s.xs)});
}

TEST_CASE("jit: a scan's body writes its ys rows in place, into the stacked results") {
  if (default_device() != Device::cpu()) return;
  // Each ys row (f32[8,64], 2 KiB) is a product's result: its plan places it in the stacked
  // ys, so an iteration allocates its arena and its carry, and nothing is copied in.
  constexpr std::int64_t kLength = 6;
  const Array w = astype(testing::random_f64(Shape{64, 64}, 8, -0.2, 0.2), DType::f32);
  const ScanBody body = [&](std::span<const Array> c, std::span<const Array> x) {
    const Array h1 = matmul(c[0], w);
    const Array h2 = matmul(tanh(h1), w);
    return ScanResult{{h2 * h1 + x[0]}, {h2}};
  };
  const ScannedStep s = scanned_step(body, kLength);
  CAPTURE(s.compiled.memory_analysis().str());
  CHECK(s.allocations <= 1 + kLength * 2);
  // The rows where they belong: the loop's own iterations, one by one.
  Array c = s.init;
  for (std::int64_t t = 0; t < kLength; ++t) {
    const Array x = s.xs.row_view(t);
    const ScanResult r = body(std::span<const Array>(&c, 1), std::span<const Array>(&x, 1));
    const std::vector<float> got = s.out[1].array().row_view(t).to_vector<float>();
    const std::vector<float> want = r.ys[0].to_vector<float>();
    for (std::size_t j = 0; j < want.size(); ++j)
      REQUIRE(std::abs(got[j] - want[j]) <= 1e-5f * (1.0f + std::abs(want[j])));
    c = r.carry[0];
  }
  testing::check_planned_peak(s.compiled, {Tree(s.init), Tree(s.xs)});
}

TEST_CASE("jit: a step's arena is not held while a loop runs, where that lowers its peak") {
  if (default_device() != Device::cpu()) return;
  // Products before the scan make temporaries of 64 KiB that die before it; one of them (h1)
  // is read again after it. One arena for the whole step would be held whole while the scan
  // runs; two, one before and one after, with h1 kept apart, hold only h1 then.
  const Array w = astype(testing::random_f64(Shape{128, 128}, 13, -0.1, 0.1), DType::f32);
  const auto f = [&](std::span<const Tree> a) {
    const Array x = a[0].array();
    const Array h1 = matmul(x, w);
    const Array h2 = matmul(tanh(h1), w);
    const Array init = sum(h2, Axes{0}, true);
    const ScanResult r = scan(
        [&](std::span<const Array> c, std::span<const Array> row) {
          const Array next = tanh(matmul(c[0], w) + row[0]);
          return ScanResult{{next}, {}};
        },
        std::vector<Array>{init}, std::vector<Array>{a[1].array()});
    return std::vector<Tree>{Tree(sum(matmul(h1 * r.carry[0], w)))};
  };
  const Array x = astype(testing::random_f64(Shape{128, 128}, 14, -1.0, 1.0), DType::f32);
  const Array xs = astype(testing::random_f64(Shape{4, 128}, 15, -1.0, 1.0), DType::f32);
  const CompiledStep compiled = jit(f).lower(std::vector<Tree>{Tree(x), Tree(xs)});
  const MemoryAnalysis& m = compiled.memory_analysis();
  CAPTURE(m.str());
  const std::vector<PlannedArena>& arenas = m.buffers.arenas;
  REQUIRE(arenas.size() == 2);
  std::ptrdiff_t loop = -1;
  for (std::size_t i = 0; i < compiled.graph().eqns.size(); ++i)
    if (compiled.graph().eqns[i].prim->name() == "scan") loop = static_cast<std::ptrdiff_t>(i);
  CHECK((arenas[0].last < loop && loop < arenas[1].first));
  const std::vector<Array> unplanned = eval_graph(compiled.graph(), std::vector<Array>{x, xs});
  testing::check_same_values(compiled({Tree(x), Tree(xs)})[0].array(), unplanned[0]);
  testing::check_planned_peak(compiled, {Tree(x), Tree(xs)});
}

TEST_CASE("jit: the planned peak counts the constants and literals the step holds") {
  if (default_device() != Device::cpu()) return;
  // A captured array becomes a constant of the graph, a scalar a literal; the scanned body has
  // its own. The step holds them from its compilation on, and its peak counts them once.
  Backend& be = backend(Device::cpu());
  const Array init = Array::full(Shape{64}, 1.0, DType::f32);
  const Array xs = Array::full(Shape{3, 64}, 1.0, DType::f32);
  const std::int64_t before = be.memory_stats().live_bytes;
  const Array w = Array::full(Shape{64}, 0.5, DType::f32);
  const auto f = [&](std::span<const Tree> a) {
    const ScanResult r = scan(
        [&](std::span<const Array> carry, std::span<const Array> row) {
          return ScanResult{{carry[0] * w + row[0] * 3.0f}, {}};
        },
        std::vector<Array>{a[0].array() + 2.0f}, std::vector<Array>{a[1].array()});
    return std::vector<Tree>{Tree(r.carry[0])};
  };
  const CompiledStep compiled = jit(f).lower(std::vector<Tree>{Tree(init), Tree(xs)});
  const MemoryAnalysis& m = compiled.memory_analysis();
  CAPTURE(m.str());
  // w and the scalars the passes left as literals (a fused program keeps its own): what
  // lowering left live.
  CHECK(m.constant_bytes >= w.nbytes() + 4);
  CHECK(be.memory_stats().live_bytes - before == m.constant_bytes);
  CHECK(m.peak_bytes - m.constant_bytes ==
        plan_memory(compiled.graph(), {false, false}).peak_bytes);
  testing::check_planned_peak(compiled, {Tree(init), Tree(xs)});
}
