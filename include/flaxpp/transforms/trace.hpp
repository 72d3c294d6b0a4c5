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
// Receives output k of a graph as soon as it is final.
using OutputSink = std::function<void(std::size_t k, Array value)>;
// The same, handing each output to `on_output` as soon as no equation reads it any more
// (outputs that are inputs, constants or literals before the first equation) instead of
// keeping it to the end: the caller can consume it (e.g. update a parameter with its
// gradient) while the rest of the graph runs. Every slot of the result is then null.
void eval_graph(const ir::Graph& graph, std::vector<Array>&& args, const OutputSink& on_output);

}  // namespace flaxpp
