#include "flaxpp/ir/flops.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include "flaxpp/ir/elementwise_program.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/primitive_rules.hpp"

namespace flaxpp::ir {

std::int64_t flops(const Graph& graph) {
  std::int64_t total = 0;
  for (const Eqn& e : graph.eqns) {
    if (e.prim == &lax::dot_general_p || e.prim == &lax::dot_general_bias_p) {
      const auto& d = e.params.get<DotDimensionNumbers>("dimension_numbers");
      const AVal lhs = graph.aval(e.inputs.at(0));
      std::int64_t contracted = 1;
      for (const std::int64_t axis : d.lhs_contracting)
        contracted *= lhs.shape[axis];
      total += 2 * graph.aval(e.outputs.at(0)).shape.size() * contracted;
      continue;
    }
    bool holds_graph = false;
    const std::int64_t trips = loop_trips(e).value_or(1);
    for_each_subgraph(e, [&](const std::string&, const Graph& sub) {
      holds_graph = true;
      total += trips * flops(sub);
    });
    if (holds_graph) continue;
    std::int64_t written = 0;
    for (const VarId v : e.outputs)
      written += graph.aval(v).shape.size();
    if (e.prim == &lax::fused_elementwise_p) {
      const auto& program = e.params.get<std::shared_ptr<const ElementwiseProgram>>("program");
      written = written / static_cast<std::int64_t>(std::max<std::size_t>(e.outputs.size(), 1)) *
                static_cast<std::int64_t>(program->code.size());
    }
    total += written;
  }
  return total;
}

}  // namespace flaxpp::ir
