// Batching a graph traced for one example (JAX's batch_jaxpr): the interpreter under vmap and
// under the batching rules of higher-order primitives, whose bodies are graphs. Private to the
// transforms layer; transforms/vmap.hpp is the public form.
#pragma once

#include <cstdint>
#include <vector>

#include "flaxpp/ir/graph.hpp"
#include "flaxpp/ir/primitive_rules.hpp"

namespace flaxpp::transforms {

// `aval` with a new leading axis of `n`: a batch's (vmap) or a scan's stacked rows.
AVal with_leading_axis(const AVal& aval, std::int64_t n);

// Runs `graph`, traced for one example, on a batch of `size` examples: args[i] has the batch
// axis first where batched[i], and is the same for every example otherwise. Each equation
// whose operands are all unbatched is bound as it is; the others through their primitive's
// batching rule (a primitive without one is refused, naming it). Values are released after
// their last use. Returns the outputs, each marked batched or not.
ir::BatchedResults batch_eval(const ir::Graph& graph, std::vector<Array> args,
                              const std::vector<bool>& batched, std::int64_t size);

// `graph` for a batch, as a graph (a call's or a loop's body under vmap): its inputs marked in
// `batched` gain the batch axis, and so do the outputs marked in out_batched (at least those
// marked in `force_batched`, where given: those the same for every example are broadcast).
// The values the batched graph captured lead its inputs, and are `consts` (pass them first,
// unbatched).
struct BatchedGraph {
  ir::Graph graph;
  std::vector<Array> consts;
  std::vector<bool> out_batched;
};
BatchedGraph batch_graph(const ir::Graph& graph, const std::vector<bool>& batched,
                         std::int64_t size, const std::vector<bool>& force_batched = {});

}  // namespace flaxpp::transforms
