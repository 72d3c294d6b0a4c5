#include "flaxpp/ir/flops.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "flaxpp/ir/elementwise_program.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/primitive_rules.hpp"

namespace flaxpp::ir {

std::int64_t eqn_flops(const Graph& graph, const Eqn& e) {
  return eqn_flops(e, graph.input_avals(e), graph.output_avals(e));
}

std::int64_t eqn_flops(const Eqn& e, std::span<const AVal> inputs, std::span<const AVal> outputs) {
  if (const FlopsRule* rule = flops_rule(*e.prim)) return (*rule)(inputs, outputs, e.params);
  if (const auto held = over_held_graphs<std::int64_t>(e, [](const Graph& g) { return flops(g); }))
    return *held;
  if (e.prim == &lax::fused_elementwise_p) {
    // An operation per instruction and per row reduction, for each element.
    const auto& program = e.params.get<std::shared_ptr<const ElementwiseProgram>>("program");
    return program->group_elements(inputs) *
           static_cast<std::int64_t>(program->code.size() + program->row_reductions.size());
  }
  std::int64_t total = 0;
  for (const AVal& out : outputs)
    total += out.shape.size();
  return total;
}

std::int64_t flops(const Graph& graph) {
  std::int64_t total = 0;
  for (const Eqn& e : graph.eqns)
    total += eqn_flops(graph, e);
  return total;
}

}  // namespace flaxpp::ir
