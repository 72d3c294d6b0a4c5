// flaxpp/transforms/trace.hpp — tracing C++ functions into Graphs, and evaluating Graphs.
// The same user function runs eagerly (on concrete Arrays) or traced (on tracers that record
// every primitive into a Graph), as in JAX.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/graph.hpp"

namespace flaxpp {

// A function of a list of arrays to a list of arrays: the form every transform works on.
using ArrayFn = std::function<std::vector<Array>(std::span<const Array>)>;

// Traces `f` on abstract inputs of the given avals (jax.make_jaxpr). Concrete arrays that `f`
// captures become constants of the graph (0-d ones literals); so do tracers of enclosing
// traces, which keeps nested transforms composable.
ir::Graph make_graph(const ArrayFn& f, std::span<const AVal> in_avals);

// Evaluates `graph` on `args` by binding each equation in order (so under an enclosing trace
// it is recorded there, and eagerly it runs on the backends). Every intermediate is released
// right after its last use: between two equations only values still needed are alive.
std::vector<Array> eval_graph(const ir::Graph& graph, std::span<const Array> args);
// The same, taking ownership of `args`: an argument is then released after its last use too.
std::vector<Array> eval_graph(const ir::Graph& graph, std::vector<Array>&& args);

}  // namespace flaxpp
