// flaxpp/transforms/while_loop.hpp — jax.lax.while_loop and jax.lax.fori_loop: a loop whose
// body is traced once. while_loop runs until a predicate of its carry is false, a number of
// iterations known only at run time, so (as in JAX) it cannot be reverse-differentiated: asking
// for its gradient is an error that names fori_loop and scan. fori_loop with static bounds is a
// scan over the iteration count and differentiates like one; with bounds that are arrays it is a
// while_loop.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::lax {

// The predicate: the carry -> a bool scalar. The body: the carry -> the next carry (the same
// shapes and dtypes).
using LoopCond = std::function<Array(std::span<const Array> carry)>;
using LoopBody = std::function<std::vector<Array>(std::span<const Array> carry)>;

// jax.lax.while_loop(cond_fun, body_fun, init_val): the carry after the last iteration.
std::vector<Array> while_loop(const LoopCond& cond_fun, const LoopBody& body_fun,
                              std::span<const Array> init_val);

// fori_loop's body: (the iteration's index, an int32 scalar; the carry) -> the next carry.
using ForiBody = std::function<std::vector<Array>(const Array& i, std::span<const Array> carry)>;

// jax.lax.fori_loop(lower, upper, body_fun, init_val) with static bounds: body_fun applied for
// i = lower, ..., upper - 1 (no iteration where upper <= lower), as a scan, so differentiable.
std::vector<Array> fori_loop(std::int32_t lower, std::int32_t upper, const ForiBody& body_fun,
                             std::span<const Array> init_val);
// The same with the bounds as int32 scalars known only at run time: a while_loop, not
// reverse-differentiable.
std::vector<Array> fori_loop(const Array& lower, const Array& upper, const ForiBody& body_fun,
                             std::span<const Array> init_val);

// The primitive (printed as while, JAX's while_p): operands (the predicate's captured values,
// the body's, then the carry); params "cond_jaxpr" (its captured values, the carry -> bool[]),
// "body_jaxpr" (its captured values, the carry -> the carry), "cond_nconsts", "body_nconsts".
extern const ir::Primitive while_p;

}  // namespace flaxpp::lax
