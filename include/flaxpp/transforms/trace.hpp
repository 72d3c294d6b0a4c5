// flaxpp/transforms/trace.hpp — tracing C++ functions into Graphs (and, through
// eval_graph.hpp, evaluating them).
// The same user function runs eagerly (on concrete Arrays) or traced (on tracers that record
// every primitive into a Graph), as in JAX.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/graph.hpp"
#include "flaxpp/transforms/eval_graph.hpp"

namespace flaxpp {

// A function of a list of arrays to a list of arrays: the form every transform works on.
using ArrayFn = std::function<std::vector<Array>(std::span<const Array>)>;

// Traces `f` on abstract inputs of the given avals (jax.make_jaxpr). Concrete arrays that `f`
// captures become constants of the graph (0-d ones literals); so do tracers of enclosing
// traces, which keeps nested transforms composable.
ir::Graph make_graph(const ArrayFn& f, std::span<const AVal> in_avals);

// Makes the constants of `g` (the values its function captured) its leading inputs and
// returns them, for a higher-order primitive to pass as operands (JAX's closure conversion):
// captured parameters then get gradients.
std::vector<Array> close_over_consts(ir::Graph& g);

}  // namespace flaxpp
