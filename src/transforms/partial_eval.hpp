// The known/unknown split of partial evaluation (JAX's partial_eval_jaxpr_nounits). Private to
// the transforms layer.
#pragma once

#include <vector>

#include "flaxpp/ir/graph.hpp"

namespace flaxpp::transforms {

struct PartialEvalResult {
  // Known part: the known inputs -> (its share of the outputs, then the residuals).
  ir::Graph known;
  // Unknown part: (residuals, then the unknown inputs) -> its share of the outputs.
  ir::Graph unknown;
  std::vector<bool> output_known;  // per output of the original graph: computed by `known`
  std::size_t num_residuals = 0;
};

// Splits `graph` given which inputs are unknown: an equation is known when all its inputs are
// (constants and literals are known). Known values the unknown part reads become residuals;
// known constants it reads stay constants of the unknown part.
PartialEvalResult partial_eval(const ir::Graph& graph, const std::vector<bool>& input_unknown);

}  // namespace flaxpp::transforms
