// make_graph: tracing a function into a graph.
#include "flaxpp/transforms/trace.hpp"

#include "flaxpp/ir/graph.hpp"
#include "transforms/graph_trace.hpp"

namespace flaxpp {

ir::Graph make_graph(const ArrayFn& f, std::span<const AVal> in_avals) {
  transforms::GraphTrace trace;
  std::vector<Array> outputs;
  {
    ir::ActiveTrace active(trace);
    std::vector<Array> inputs;
    for (const AVal& a : in_avals)
      inputs.push_back(trace.new_input(a));
    outputs = f(inputs);
  }
  return trace.finish(outputs);
}

std::vector<Array> close_over_consts(ir::Graph& g) {
  std::vector<Array> consts = std::move(g.consts);
  g.invars.insert(g.invars.begin(), g.constvars.begin(), g.constvars.end());
  g.constvars.clear();
  g.consts.clear();
  return consts;
}

}  // namespace flaxpp
