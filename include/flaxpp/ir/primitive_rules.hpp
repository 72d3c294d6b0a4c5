// flaxpp/ir/primitive_rules.hpp — what the generic passes and executors ask of a primitive
// beyond its shape, VJP and evaluation, registered per primitive by the file that defines it
// (JAX's per-primitive rule tables), so that no generic file names a primitive:
//   - effects: what an equation does besides computing its results from its operands;
//   - calls and loops: a primitive whose equation runs a graph it holds on its operands, once
//     or once per iteration;
//   - batching: how an equation runs on a batch of examples at once (jax.vmap's rules);
//   - flops: the arithmetic of an equation whose work is not one operation per element it
//     writes (flaxpp/ir/flops.hpp's default).
// The transforms layer keeps its reverse-mode rules beside these
// (flaxpp/transforms/tape.hpp). Register before first use: from a static initialiser of the
// primitive's own file.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "flaxpp/ir/graph.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::ir {

// What an equation of a primitive does besides computing its results (JAX's effects). The
// default, for a primitive that registered none, is a pure computation.
struct Effects {
  // It exchanges data between processes, which must all run it in the same order: the passes
  // schedule it as soon as its operands are final, and a recording of the step asks the other
  // processes before it replays one (transforms/recording_agreement.hpp).
  bool collective = false;
  // One half of a collective split in two (register_async_collective): the exchange is in
  // flight between the start and its done, holding buffers memory analysis does not model.
  bool async_half = false;
  // It reads a value of its operands on the host to decide what runs next (cond's branch,
  // while_loop's predicate): a CUDA-graph recording of the step, which replays one fixed
  // sequence of kernels, cannot hold it, so such a step runs eagerly.
  bool host_sync = false;
};
void register_effects(const Primitive& prim, Effects effects);
const Effects& effects_of(const Primitive& prim);
inline bool is_collective(const Eqn& e) {
  return effects_of(*e.prim).collective;
}

// Registers `prim` as a call: its equation runs the graph held in param `body` on its
// operands, and that graph's results are its results (JAX's call primitives: remat's body,
// custom_vjp's primal function). jit inlines calls once differentiation is done
// (inline_calls), the executor runs them inline so that their results leave one by one, and
// memory analysis counts the body's peak.
void register_call(const Primitive& prim, std::string body);
// The param holding the body of a call's equation, or nullptr for a primitive that is not a
// call.
const std::string* call_body(const Primitive& prim);
// The body of `e`, an equation of a call.
const Graph& call_graph(const Eqn& e);

// Registers `prim` as a loop: its equation runs the graph held in param `body` once per
// iteration (jax.lax.scan's), and its results, stacked over the iterations, exist from the
// first one on. Memory analysis counts one iteration's peak beside them, a lower bound, unless
// the primitive registers a memory model (transforms/memory_analysis.hpp; scan does). `trips`,
// where the number of iterations is known before the loop runs (a scan's length), gives it.
using LoopTrips = std::function<std::int64_t(const Eqn& e)>;
void register_loop(const Primitive& prim, std::string body, LoopTrips trips = {});
// The param holding the body of a loop's equation, or nullptr for a primitive that is not a
// loop.
const std::string* loop_body(const Primitive& prim);
// How often the loop `e` runs its body, where that is known before it runs; nullopt for a loop
// decided while it runs (while_loop) and for an equation that is no loop.
std::optional<std::int64_t> loop_trips(const Eqn& e);
// A measure of an equation that holds graphs, from `per_graph` (the measure of one graph):
// every graph it holds once, a loop's body once per iteration (loop_trips; once where that
// is unknown); nullopt for an equation that holds none. ir::flops and ir::modeled_seconds
// count bodies this way.
template <class T, class F>
std::optional<T> over_held_graphs(const Eqn& e, F&& per_graph) {
  std::optional<T> total;
  const T trips = static_cast<T>(loop_trips(e).value_or(1));
  for_each_subgraph(e, [&](const std::string&, const Graph& sub) {
    total = total.value_or(T{}) + trips * per_graph(sub);
  });
  return total;
}

// Batching (JAX's per-primitive batching rules, on which transforms/vmap.hpp stands): an
// equation applied to a batch of examples in one go. An operand marked batched carries the batch
// axis, of length `size`, as its axis 0, ahead of the axes the equation's params describe; an
// operand not marked is the same for every example. A rule binds primitives on them (recorded
// by an enclosing trace, evaluated otherwise) and returns the equation's results for every
// example, each marked batched (its axis 0 the batch axis) or not. vmap calls a rule only when
// at least one operand is batched, and checks what it returns against the shape rule.
struct BatchArgs {
  const Primitive& prim;
  std::span<const Array> inputs;
  const std::vector<bool>& batched;
  const Params& params;
  std::int64_t size = 0;
};
struct BatchedResults {
  std::vector<Array> outputs;
  std::vector<bool> batched;
};
using BatchRule = std::function<BatchedResults(const BatchArgs& args)>;
void register_batching(const Primitive& prim, BatchRule rule);
// The batching rule of `prim`, or nullptr where it has none (vmap then refuses an equation
// of it whose operands are batched, naming it).
const BatchRule* batching_rule(const Primitive& prim);
// For writing rules: x with the batch axis (x itself where batched, else x broadcast along a
// new axis 0 of length `size`), and x with its axis `from` moved to `to`, the others in order
// (jnp.moveaxis: a result's batch axis must end up first).
Array with_batch_axis(const Array& x, bool batched, std::int64_t size);
Array move_axis(const Array& x, std::int64_t from, std::int64_t to);

// The floating-point operations of one equation of a primitive, from its operands' and
// results' avals and its params: what recomputing it costs (a product's 2·M·N·K).
using FlopsRule = std::function<std::int64_t(std::span<const AVal> inputs,
                                             std::span<const AVal> outputs, const Params& params)>;
void register_flops(const Primitive& prim, FlopsRule rule);
// The FLOPs rule of `prim`, or nullptr where it has none.
const FlopsRule* flops_rule(const Primitive& prim);

}  // namespace flaxpp::ir
