// flaxpp/ir/primitive_rules.hpp — what the generic passes and executors ask of a primitive
// beyond its shape, VJP and evaluation, registered per primitive by the file that defines it
// (JAX's per-primitive rule tables), so that no generic file names a primitive:
//   - effects: what an equation does besides computing its results from its operands;
//   - calls and loops: a primitive whose equation runs a graph it holds on its operands, once
//     or once per iteration.
// The transforms layer keeps its reverse-mode rules beside these
// (src/transforms/tape.hpp). Register before first use: from a static initialiser of the
// primitive's own file.
#pragma once

#include <string>

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
// first one on. Memory analysis counts one iteration's peak beside them, a lower bound.
void register_loop(const Primitive& prim, std::string body);
// The param holding the body of a loop's equation, or nullptr for a primitive that is not a
// loop.
const std::string* loop_body(const Primitive& prim);

}  // namespace flaxpp::ir
