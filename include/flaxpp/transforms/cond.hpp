// flaxpp/transforms/cond.hpp — jax.lax.cond and jax.lax.switch: one of several branches, chosen
// by a value computed at run time, applied to the operands. Every branch is traced (so each
// must accept the operands and all must return the same shapes and dtypes), and only the chosen
// one runs. Differentiated as JAX does it (cond_ad.cpp): each branch is linearised, the forward
// cond also returns the residuals the chosen branch's backward reads (merged across branches by
// type, JAX's _merge_branch_residuals), and the backward pass is a cond over the branches'
// backward parts. Inside a checkpoint region the region's policy decides, value by value inside
// the branches, what the forward cond keeps.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/tree.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::lax {

// A branch: the operands -> its results.
using Branch = std::function<std::vector<Array>(std::span<const Array> operands)>;

// jax.lax.switch(index, branches, *operands): branches[clamp(index, 0, n - 1)](operands).
// `index` is an integer scalar (out-of-range values are clamped, as in JAX).
std::vector<Array> switch_(const Array& index, std::span<const Branch> branches,
                           std::span<const Array> operands);

// jax.lax.cond(pred, true_fun, false_fun, *operands): true_fun(operands) where the scalar
// `pred` is true (non-zero), else false_fun(operands).
std::vector<Array> cond(const Array& pred, const Branch& true_fun, const Branch& false_fun,
                        std::span<const Array> operands);

// The same on a tree of operands (jax.lax.cond's pytrees): each branch maps the tree to a
// tree, and every branch's result must have the same structure, shapes and dtypes.
using TreeBranch = std::function<Tree(const Tree& operand)>;
Tree switch_(const Array& index, std::span<const TreeBranch> branches, const Tree& operand);
Tree cond(const Array& pred, const TreeBranch& true_fun, const TreeBranch& false_fun,
          const Tree& operand);

// The primitive (printed as cond, JAX's cond_p): operands (index int32[] in [0, n), then the
// branches' operands); params "branch<k>" for k < "num_branches" (each: operands -> results,
// one signature for all). A cond made by differentiation also has "residuals" (bool: it
// computes the residuals of a split cond) or "num_residuals" with "vjp_branch<k>" (the
// branches' backward parts, read by its VJP rule).
extern const ir::Primitive cond_p;

}  // namespace flaxpp::lax
