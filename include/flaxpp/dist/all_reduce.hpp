// flaxpp/dist/all_reduce.hpp — all_reduce as a primitive: the reduction of an array over every
// process of the job (JAX's psum, pmean and pmax over the job's devices), usable inside
// jit, grad and checkpoint like any lax primitive. Its VJP is the same all_reduce of the
// cotangent for sum and mean (an all-reduce is its own transpose); max has none.
#pragma once

#include <span>
#include <vector>

#include "flaxpp/dist/communicator.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::dist {

extern const ir::Primitive all_reduce_p;
// all_reduce in two, as jit runs it (JitOptions::overlap_collectives): all_reduce_start copies
// its operands into buckets and begins their reduction in place (its results are the buckets'
// parts, being written; the operands are free to go); all_reduce_done waits for it and gives
// the reductions, each in a buffer of its own. Evaluated in that order, and only as jit places
// them.
extern const ir::Primitive all_reduce_start_p, all_reduce_done_p;

Array all_reduce(const Array& x, ReduceOp op);
// Several arrays reduced together (DDP's gradient buckets): one collective per dtype and
// device, the arrays packed into one flat buffer that it reduces in place, each result an
// array of its own. A mean is the sum divided by the number of processes, as jax.lax.pmean is
// psum's; in a graph the division is an equation of its own.
// With two processes the results equal reducing each array alone, bit for bit; with more, the
// transport may sum a larger buffer in another order.
std::vector<Array> all_reduce(std::span<const Array> xs, ReduceOp op);

}  // namespace flaxpp::dist
