// flaxpp/transforms/eval_graph.hpp — running a Graph equation by equation, each value released
// after its last use: the executor of eager calls of higher-order primitives (a checkpoint's
// body, a scan's per iteration) and of jitted steps on the CPU.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/graph.hpp"
#include "flaxpp/transforms/buffer_assignment.hpp"

namespace flaxpp {

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
// The same as the second, with the run's temporaries in the arena `buffers` lays out
// (plan_memory's, for this graph and these donations): a jitted step's run. Each value of the
// arena is where the plan puts it; a result an equation made elsewhere is moved there.
std::vector<Array> eval_graph(const ir::Graph& graph, std::vector<Array>&& args,
                              const BufferAssignment& buffers);
// Where the caller wants a result written: its bytes of `buffer` from `offset` (a loop's row
// of its stacked results). A null buffer: anywhere.
struct OutputDestination {
  std::shared_ptr<const Buffer> buffer;
  std::int64_t offset = 0;
};
// The same, with result k written into destinations[k] (plan_memory's placed_outputs, where
// the plan was made with them): the equation that makes it allocates it there, and a result
// made elsewhere is moved there. The result is then a slot of that buffer.
std::vector<Array> eval_graph(const ir::Graph& graph, std::vector<Array>&& args,
                              const BufferAssignment& buffers,
                              std::span<const OutputDestination> destinations);

}  // namespace flaxpp
