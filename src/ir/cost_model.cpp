#include "flaxpp/ir/cost_model.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "flaxpp/ir/elementwise_program.hpp"
#include "flaxpp/ir/flops.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/primitive_rules.hpp"

namespace flaxpp::ir {
namespace {

// Transcendental operations: a fused program's transcendental instructions for each element
// it runs over, or one per element written by a transcendental primitive.
std::int64_t transcendentals(const Eqn& e, std::span<const AVal> inputs,
                             std::span<const AVal> outputs) {
  if (e.prim == &lax::fused_elementwise_p) {
    const auto& program = e.params.get<std::shared_ptr<const ElementwiseProgram>>("program");
    return program->group_elements(inputs) *
           std::count_if(program->code.begin(), program->code.end(),
                         [](const ElementwiseProgram::Instr& i) {
                           return kernels::program_op_is_transcendental(i.op);
                         });
  }
  const std::optional<ElementwiseProgram::Op> op = program_op(*e.prim);
  return op && kernels::program_op_is_transcendental(*op) && !outputs.empty()
             ? outputs.front().shape.size()
             : 0;
}

}  // namespace

Cost eqn_cost(const Eqn& e, std::span<const AVal> inputs, std::span<const AVal> outputs) {
  Cost c;
  c.flops = eqn_flops(e, inputs, outputs);
  c.transcendentals = transcendentals(e, inputs, outputs);
  for (const AVal& a : inputs)
    c.bytes += a.nbytes();
  for (const AVal& a : outputs)
    c.bytes += a.nbytes();
  return c;
}

double CostModel::seconds(const Cost& c) const {
  return seconds_per_equation +
         std::max(static_cast<double>(c.flops) / flops_per_second,
                  static_cast<double>(c.bytes) / bytes_per_second) +
         static_cast<double>(c.transcendentals) / transcendentals_per_second;
}

CostModel CostModel::of(DeviceKind kind) {
  if (kind == DeviceKind::cuda)
    // H100 SXM: 67 TFLOP/s float32 (products through cuBLAS reach ~50), 3.35 TB/s of HBM3,
    // 16 special-function results per clock per SM over 132 SMs, a CUDA graph's kernel ~2 µs.
    return {.flops_per_second = 50e12,
            .transcendentals_per_second = 4e12,
            .bytes_per_second = 3e12,
            .seconds_per_equation = 2e-6};
  // Measured on the development machine (docs/PERFORMANCE.md, "Remat by budget"), each a
  // jitted step of one equation at the LM's sizes (medians): products of 2048x64x64 to 1024^3
  // at 340-460 GFLOP/s; exp over 2^19 and 2^21 elements at 2.7·10^9 elements/s; add over the
  // same at 165 GB/s moved; a whole step of one tiny equation 1.5 µs, of which an equation
  // inside a longer step costs about 1 µs. `flaxpp bench --cost-model` measures the four on
  // any machine.
  return {.flops_per_second = 400e9,
          .transcendentals_per_second = 2.7e9,
          .bytes_per_second = 165e9,
          .seconds_per_equation = 1e-6};
}

double eqn_seconds(const Eqn& e, std::span<const AVal> inputs, std::span<const AVal> outputs,
                   const CostModel& model) {
  if (const auto held = over_held_graphs<double>(
          e, [&](const Graph& g) { return modeled_seconds(g, model); }))
    return *held;
  return model.seconds(eqn_cost(e, inputs, outputs));
}

double eqn_seconds(const Graph& graph, const Eqn& e, const CostModel& model) {
  return eqn_seconds(e, graph.input_avals(e), graph.output_avals(e), model);
}

double modeled_seconds(const Graph& graph, const CostModel& model) {
  double total = 0;
  for (const Eqn& e : graph.eqns)
    total += eqn_seconds(graph, e, model);
  return total;
}

}  // namespace flaxpp::ir
