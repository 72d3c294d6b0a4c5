#include "cli/bench_cost_model.hpp"

#include <algorithm>
#include <iostream>
#include <vector>

#include "cli/bench_common.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/ir/cost_model.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/random/distributions.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/transforms/jit.hpp"

namespace flaxpp::cli {
namespace {

// One probe: a jitted step of one equation, its median seconds and its cost (ir::eqn_cost).
struct Probe {
  double seconds = 0;
  ir::Cost cost;
  std::int64_t equations = 0;  // in its lowered step: 1 unless jit added one
};

Probe probe(const ArrayFn& f, const std::vector<Array>& args, std::int64_t steps) {
  const Jitted step = jit([f](std::span<const Tree> a) {
    std::vector<Array> arrays;
    for (const Tree& t : a)
      arrays.push_back(t.array());
    return std::vector<Tree>{Tree(f(arrays)[0])};
  });
  const std::vector<Tree> trees(args.begin(), args.end());
  const CompiledStep compiled = step.lower(trees);
  Probe p;
  for (const ir::Eqn& e : compiled.graph().eqns) {
    ++p.equations;
    p.cost += ir::eqn_cost(e, compiled.graph().input_avals(e), compiled.graph().output_avals(e));
  }
  p.seconds = median_step_ms(steps, [&] { (void)compiled(trees); }) / 1e3;
  return p;
}

}  // namespace

int bench_cost_model(std::int64_t steps, std::ostream& out) {
  const auto normal = [](std::uint32_t seed, Shape shape) {
    return random::normal(random::key(seed), shape);
  };
  constexpr std::int64_t kElements = std::int64_t{1} << 21;  // 8 MiB of float32
  const Array small = normal(1, Shape{64});
  const Array x = normal(2, Shape{kElements}), y = normal(3, Shape{kElements});
  const Array a = normal(4, Shape{1024, 1024}), b = normal(5, Shape{1024, 1024});
  const auto add2 = [](std::span<const Array> v) { return std::vector<Array>{v[0] + v[1]}; };
  const auto exp1 = [](std::span<const Array> v) { return std::vector<Array>{exp(v[0])}; };
  const auto product = [](std::span<const Array> v) {
    return std::vector<Array>{matmul(v[0], v[1])};
  };
  std::cerr << "bench: cost model probes (" << steps << " steps each)\n";
  // A step of one tiny equation: what any equation costs; the others net of it.
  const Probe tiny = probe(add2, {small, small}, steps);
  const Probe moved = probe(add2, {x, y}, steps);
  const Probe transcendental = probe(exp1, {x}, steps);
  const Probe products = probe(product, {a, b}, steps);
  // Each rate from the time its probe takes beyond the tiny step, the earlier rates' share
  // taken out as the model adds them: max(flops / F, bytes / B) + transcendentals / T.
  const auto beyond = [&](const Probe& p, double known) {
    return std::max(p.seconds - tiny.seconds - known, 1e-9);
  };
  ir::CostModel measured{.flops_per_second = 0,
                         .transcendentals_per_second = 0,
                         .bytes_per_second = 0,
                         .seconds_per_equation = tiny.seconds};
  measured.bytes_per_second = static_cast<double>(moved.cost.bytes) / beyond(moved, 0);
  measured.flops_per_second = static_cast<double>(products.cost.flops) / beyond(products, 0);
  const double exp_roofline =
      std::max(static_cast<double>(transcendental.cost.flops) / measured.flops_per_second,
               static_cast<double>(transcendental.cost.bytes) / measured.bytes_per_second);
  measured.transcendentals_per_second = static_cast<double>(transcendental.cost.transcendentals) /
                                        beyond(transcendental, exp_roofline);
  const ir::CostModel built_in = ir::CostModel::of(default_device().kind);
  const auto json = [](const ir::CostModel& m) {
    return io::Json{{"flops_per_second", m.flops_per_second},
                    {"transcendentals_per_second", m.transcendentals_per_second},
                    {"bytes_per_second", m.bytes_per_second},
                    {"seconds_per_equation", m.seconds_per_equation}};
  };
  io::Json equations = io::Json::object();
  for (const auto& [name, p] : {std::pair<const char*, const Probe&>{"tiny", tiny},
                                {"bytes", moved},
                                {"transcendentals", transcendental},
                                {"flops", products}})
    equations[name] = p.equations;
  out << io::Json{{"framework", "flaxpp"},
                  {"backend", default_device().kind == DeviceKind::cpu ? "cpu" : "cuda"},
                  {"steps", steps},
                  {"probe_equations", equations},
                  {"measured", json(measured)},
                  {"built_in", json(built_in)}}
             .dump()
      << std::endl;
  return 0;
}

}  // namespace flaxpp::cli
