// flaxpp/ir/passes.hpp — rewrites of a Graph that keep its meaning: dead-code elimination and
// common-subexpression elimination. jit runs them on every traced step, autodiff on its
// forward and backward parts; tests run Graph::verify() after each.
#pragma once

#include "flaxpp/ir/graph.hpp"

namespace flaxpp::ir {

// Removes equations none of whose outputs reach the graph's outputs, and constants nothing
// reads.
void dce(Graph& graph);

// Merges equations that compute the same thing: the same primitive, params and inputs (a
// variable, or a literal with the same dtype and bits). Equations holding a sub-graph (a
// checkpoint region) are never merged, and nothing inside a region is merged with anything
// outside it: as JAX's prevent_cse, remat must really recompute. Returns how many were
// merged (their uses read the first one's outputs; dce then drops them).
int cse(Graph& graph);

}  // namespace flaxpp::ir
