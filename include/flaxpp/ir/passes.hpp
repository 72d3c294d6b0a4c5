// flaxpp/ir/passes.hpp — rewrites of a Graph that keep its meaning: dead-code elimination,
// common-subexpression elimination, and the memory passes (one fused update per leaf, and
// equations that free memory scheduled as early as they can run). jit runs them on every
// traced step, autodiff dce and cse on its forward and backward parts; tests run
// Graph::verify() after each.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

// Replaces each equation of a call (ir/primitive_rules.hpp: a checkpoint region's body, a
// custom_vjp call's primal function) by the body's equations, recursively, so that later
// passes schedule and fuse them with the rest; run it after differentiation, and after cse,
// which must not merge a checkpoint region with the code around it. Returns how many were
// inlined.
int inline_calls(Graph& graph);

// Replaces each sub-graph the equations hold in their params (a scan's body) by a copy that
// `rewrite` changed, each distinct sub-graph rewritten once however often it appears (a
// sub-graph's own sub-graphs are rewrite's to visit). Returns how many it rewrote. jit runs
// its passes on a loop's body so.
int rewrite_subgraphs(Graph& graph, const std::function<void(Graph&)>& rewrite);

// Turns chains of elementwise equations over arrays of one shape and one float32/float64
// dtype (every primitive of flaxpp/kernels/elementwise.hpp's lists whose line lets it fuse, and
// integer_pow; comparisons feed select_n or a conversion to that dtype; 0-d operands and
// literals broadcast) into fused_elementwise equations, XLA's loop
// fusion: one pass over memory, one CUDA launch, the intermediates never stored, the same
// bits. Each fused equation stands where its first equation stood and may write into
// operands it reads last; its param "fused_eqns" says how many equations it replaced. Returns
// how many fused equations it made.
struct FusionOptions {
  // bfloat16 and float16 chains fuse too: for a backend whose fused programs round each
  // instruction's result to the arrays' dtype, as a primitive stores it (CUDA's; the CPU has
  // no 16-bit arithmetic).
  bool sixteen_bit = false;
  // A reduce_sum or reduce_max over the trailing axes of a value a chain computes or reads
  // element by element joins the chain as a row reduction (ElementwiseProgram::row_reductions;
  // XLA's reduction fusion): the value is read once, and not stored at all where only the
  // reduction reads it (a softmax's exponentials' sum, LayerNorm's squares). For the CPU's
  // programs, which run them.
  bool row_reductions = false;
};
int fuse_elementwise(Graph& graph, FusionOptions options = {});

// Turns each float32/float64 dot_general without batch dims whose one reader adds a bias
// broadcast along its rhs free axes (nn.Dense's kernel product and bias) into
// dot_general_bias: the bias in cuBLASLt's epilogue on a GPU, one pass over the fresh product
// on the CPU, the same bits. A product and its recomputation under remat (the same operands
// and params) are both fused or neither. Run it before fuse_elementwise, which would take the
// add. Returns how many it fused; each fused equation's param "fused_eqns" counts the
// equations it replaced.
int fuse_dot_bias(Graph& graph);

// How many equations `graph` holds, sub-graphs' (a scan's body, counted once however often it
// runs) included, and how many it would without fuse_elementwise (each fused equation counted
// as the equations it replaced).
struct OpCounts {
  std::int64_t executed = 0, unfused = 0;
};
OpCounts op_counts(const Graph& graph);

// Splits each fused_elementwise equation over several groups (an optimiser's update of every
// leaf of a dtype) into one equation per group, so that each leaf's update can run as soon as
// its gradient is final (schedule_early_frees), as XLA fuses and schedules a jitted step on
// the CPU. Returns how many equations were split. (A GPU keeps one launch per dtype.)
int split_fused_groups(Graph& graph);

// Moves each equation that frees more bytes than it allocates (the bytes of the operands it
// reads last, minus its results') up to the earliest place where it reads those operands
// last still: right after their definitions and every other reader of them. Memory then only
// falls in the span it moved over. Equations with only 0-d results move up too (a few bytes
// held longer), so that what depends on them can: optax's count and bias corrections, ahead
// of the update; so do collectives (ir::Effects::collective) that free as much as they make, a
// gradient bucket's all_reduce. A leaf's update moves up to its gradient, which then never coexists with
// the other leaves' gradients. `donated[i]` says
// whether input i is the graph's to free (jit's donated arguments); constants never are.
// Equations holding sub-graphs stay where they are. Returns how many moved.
int schedule_early_frees(Graph& graph, const std::vector<bool>& donated);

// A collective that can run in the background: `sync` becomes `start` (sync's operands and
// params; its results are being written) and `done` (start's results in, sync's results
// out, once the exchange completed); both halves get the effects {collective, async_half}.
// Registered by the layer defining them (dist's all_reduce).
void register_async_collective(const Primitive& sync, const Primitive& start,
                               const Primitive& done);

// Splits each registered collective into its start and done, and moves each done, with the
// equations that read what it makes (directly or through each other), down to just before
// the next start, or the end: the processes exchange one gradient bucket while this one
// computes the next, as DDP's buckets overlap the backward pass, with two buckets in flight at
// most. Run after schedule_early_frees, which moved each collective up to where its operands
// are final and each update up to its bucket. Returns how many collectives were split.
int overlap_collectives(Graph& graph);

}  // namespace flaxpp::ir
