// A checkpoint region's values as the budget search (remat_budget.cpp) weighs them, and the
// policies it proposes from them: keeping, value class by value class, what saves the most
// modeled recomputation time per byte kept. A class is what a JAX policy sees of an equation,
// its primitive and its operands' shapes, so that every proposal is a policy a JAX program can
// pass (`lambda prim, *avals, **_: (prim.name, tuple(a.shape for a in avals)) in {...}`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "flaxpp/core/shape.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/remat_plan.hpp"

namespace flaxpp::transforms {

// The equations of one region (flattened as its policy sees them), in order.
struct RegionValues {
  struct Node {
    std::string primitive;
    std::vector<Shape> input_shapes{};
    double seconds = 0;  // its modeled time (ir::eqn_seconds)
    std::vector<std::int64_t> output_bytes{};
    // Per output: whether the backward pass reads it saved (under the policy the region was
    // differentiated with; the search takes the values of keeping everything).
    std::vector<bool> read{};
    // Per operand: the node and output that make it, or -1 for the region's inputs and
    // constants (always at hand).
    std::vector<std::pair<std::ptrdiff_t, std::size_t>> operands{};
    bool always_saved = false;  // its reverse rule saves it whatever the policy
  };
  std::vector<Node> nodes;
};

// A named policy's spelling, and what it keeps per region when every region follows it.
using NamedKept = std::pair<std::string, std::vector<std::vector<RematPlan::Kept>>>;
// For a choice that keeps `kept` in region `region`: the spelling of the first of `named`
// that keeps the same values there, else save_only_these_names(...) where every kept value is
// a checkpoint_name's output; "" where neither says it.
std::string named_equivalent(const std::vector<RematPlan::Kept>& kept, std::size_t region,
                             const std::vector<NamedKept>& named);

// A Python tuple of the items as written: "()", "(a,)", "(a, b)".
std::string python_tuple(const std::vector<std::string>& items);

// Policies keeping ever more classes of the region's values, greedily by the modeled seconds
// of recomputation they save per byte they add (a knapsack's greedy order), each step's gain
// worked out on the region's own equations: what the backward pass reads and what recomputing
// the rest needs. Ends where keeping more saves nothing. The equations are the region's as
// its keep-everything trace flattens them; inside a cond's branches the policy's answer is
// its own (no class is proposed there, so they are recomputed).
std::vector<PolicyPtr> value_chain(const RegionValues& values);

}  // namespace flaxpp::transforms
