// ir::CostModel and ir::eqn_cost (flaxpp/ir/cost_model.hpp): what an equation costs (XLA's
// flops, transcendentals and bytes accessed), unfused and fused, and the roofline seconds of a
// graph, a loop's body counted once per iteration.
#include <doctest/doctest.h>

#include <vector>

#include "flaxpp/ir/cost_model.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/scan.hpp"
#include "flaxpp/transforms/trace.hpp"

using namespace flaxpp;

namespace {

constexpr std::int64_t kN = 64;
constexpr std::int64_t kTrips = 5;
const std::vector<AVal> kTwoMatrices{AVal{Shape{kN, kN}, DType::f32},
                                     AVal{Shape{kN, kN}, DType::f32}};

// tanh(exp(x @ w) * x), summed: a product, a chain of two transcendental passes around a
// product of arrays, and a reduction.
ir::Graph traced() {
  return make_graph(
      [](std::span<const Array> v) {
        return std::vector<Array>{lax::reduce_sum(tanh(exp(matmul(v[0], v[1])) * v[0]), {0, 1})};
      },
      kTwoMatrices);
}

ir::Cost cost_of(const ir::Graph& g, const ir::Eqn& e) {
  return ir::eqn_cost(e, g.input_avals(e), g.output_avals(e));
}

}  // namespace

TEST_CASE("eqn_cost: products by their FLOPs, transcendentals by the elements they write") {
  const ir::Graph g = traced();
  CAPTURE(g.str());
  constexpr std::int64_t matrix = kN * kN * 4;  // bytes
  int seen = 0;
  for (const ir::Eqn& e : g.eqns) {
    const ir::Cost c = cost_of(g, e);
    if (e.prim == &lax::dot_general_p) {
      CHECK(c.flops == 2 * kN * kN * kN);
      CHECK(c.transcendentals == 0);
      CHECK(c.bytes == 3 * matrix);
      ++seen;
    } else if (e.prim == &lax::tanh_p || e.prim == &lax::exp_p) {
      CHECK(c.transcendentals == kN * kN);
      CHECK(c.bytes == 2 * matrix);
      ++seen;
    } else if (e.prim == &lax::mul_p) {
      CHECK(c.transcendentals == 0);
      CHECK(c.bytes == 3 * matrix);
      ++seen;
    }
  }
  CHECK(seen == 4);

  // Fused, the program counts each of its transcendental instructions once per element, and
  // its bytes are its operands and result only.
  ir::Graph fused = traced();
  REQUIRE(ir::fuse_elementwise(fused) == 1);
  CAPTURE(fused.str());
  for (const ir::Eqn& e : fused.eqns)
    if (e.prim == &lax::fused_elementwise_p) {
      const ir::Cost c = cost_of(fused, e);
      CHECK(c.transcendentals == 2 * kN * kN);
      CHECK(c.bytes == 3 * matrix);
    }
}

TEST_CASE("modeled_seconds: the roofline of every equation, a loop's body per iteration") {
  const ir::CostModel model{.flops_per_second = 1e9,
                            .transcendentals_per_second = 1e6,
                            .bytes_per_second = 1e8,
                            .seconds_per_equation = 1e-3};
  // max(flops / F, bytes / B) + transcendentals / T, plus the equation's own cost.
  CHECK(model.seconds({.flops = 2'000'000, .transcendentals = 0, .bytes = 100'000}) ==
        doctest::Approx(1e-3 + 2e-3));
  CHECK(model.seconds({.flops = 1000, .transcendentals = 1000, .bytes = 1'000'000}) ==
        doctest::Approx(1e-3 + 1e-2 + 1e-3));

  const ir::Graph g = traced();
  double by_hand = 0;
  for (const ir::Eqn& e : g.eqns)
    by_hand += model.seconds(cost_of(g, e));
  CHECK(ir::modeled_seconds(g, model) == doctest::Approx(by_hand));

  // Five iterations of a body that runs tanh(x @ w): five times the body.
  const ir::Graph looped = make_graph(
      [](std::span<const Array> v) {
        const Array w = v[1];
        const ScanBody body = [w](std::span<const Array> carry, std::span<const Array>) {
          return ScanResult{{tanh(matmul(carry[0], w))}, {}};
        };
        const Array init[] = {v[0]};
        return scan(body, init, {}, kTrips).carry;
      },
      kTwoMatrices);
  CAPTURE(looped.str());
  REQUIRE(looped.eqns.size() == 1);
  const ir::Graph body = make_graph(
      [](std::span<const Array> v) { return std::vector<Array>{tanh(matmul(v[0], v[1]))}; },
      kTwoMatrices);
  CHECK(ir::modeled_seconds(looped, model) ==
        doctest::Approx(kTrips * ir::modeled_seconds(body, model)));
}

TEST_CASE("CostModel::of: every device kind has positive rates") {
  for (const DeviceKind kind : {DeviceKind::cpu, DeviceKind::cuda}) {
    const ir::CostModel m = ir::CostModel::of(kind);
    CHECK(m.flops_per_second > 0);
    CHECK(m.transcendentals_per_second > 0);
    CHECK(m.bytes_per_second > 0);
    CHECK(m.seconds_per_equation > 0);
  }
}
