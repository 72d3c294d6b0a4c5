// flaxpp/transforms/remat_plan.hpp — what a memory budget chose (jit's
// JitOptions::memory_budget): for every checkpoint region of the step, the policy its backward
// pass follows, with the planned peak and what the choice recomputes.
//
// The choice is the candidate with the least modeled recomputation time (ir::CostModel: a
// roofline of the device's product rate, memory bandwidth, transcendental rate and
// per-equation cost, over the step's graph after jit's passes, fusion included) among those
// whose planned peak (memory_analysis(), which counts the whole step: parameters, gradients,
// optimiser state, the batch, temporaries) is at most the budget. The candidates, each traced and
// planned exactly:
// - per region, the policies from keeping everything to keeping nothing (everything_saveable,
//   dots_saveable, dots_with_no_batch_dims_saveable, nothing_saveable): all regions alike, and
//   the first k regions one step further down that list than the rest;
// - per region, the results of its k most valuable primitives kept, for every k (a primitive's
//   value: the FLOPs that recomputing its results costs per byte they hold), spelled as the
//   lambda a JAX program would pass: `lambda prim, *_, **__: prim.name in ('dot_general',)`;
// - per region, value classes kept one more at a time (a class: an equation's primitive and
//   its operands' shapes, all a JAX policy sees of it), greedily by the modeled recomputation
//   time each saves per byte it adds, so that a choice can keep an expensive elementwise
//   result (softmax's probabilities) where a named policy keeps a cheap product (the scores):
//   `lambda prim, *avals, **_: (prim.name, tuple(a.shape for a in avals)) in {...}`;
// - the regions' own policies.
// A region inside a scanned body is one region: its choice holds for every layer.
// The cost of recomputation is the modeled step's time beyond that of the step that keeps
// everything (none where it is modeled faster); ties go to keeping everything, so that a
// budget that fits everything keeps everything, then to fewer recomputed FLOPs (ir::flops:
// products 2·M·N·K, other work one per element written), then to the smaller peak. The order
// is the same for every budget, so a smaller budget never gives a larger planned peak, nor
// less modeled recomputation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace flaxpp {

struct RematPlan {
  std::int64_t budget_bytes = 0;
  // A value the backward pass reads saved instead of recomputing it (besides the region's
  // inputs, which it always reads): the equation that made it, and what keeping it saves.
  struct Kept {
    std::string primitive;  // e.g. "dot_general"
    std::string aval;       // e.g. "f32[64,48]"
    std::int64_t bytes = 0;
    // What recomputing it alone would cost (ir::eqn_flops of its equation and of those it
    // depends on inside the region); values that share work share it in their figures.
    std::int64_t flops = 0;
    std::string name{};  // a checkpoint_name's output: its name; "" for other values
    bool operator==(const Kept&) const = default;
  };
  // Per checkpoint region, in the order the regions are differentiated.
  struct Region {
    std::string policy;      // chosen, as JAX spells it: what a JAX program would pass
    std::string own_policy;  // the one the model declared
    // Where `policy` is not a named one: a named policy that keeps the same values here, as
    // JAX spells it (dots_saveable, save_only_these_names('a', 'b'), ...); "" if none does.
    std::string same_as{};
    // What the chosen policy keeps, per run of the region (per layer in a scan), in the
    // body's order.
    std::vector<Kept> kept{};
    std::int64_t kept_bytes() const;  // the sum of kept's bytes
  };
  std::vector<Region> regions;
  std::int64_t planned_peak_bytes = 0;
  bool exact = true;  // the plan is exact (memory_analysis().exact), so the peak is a guarantee
  std::int64_t recompute_flops = 0;      // FLOPs beyond the keep-everything candidate's
  double modeled_seconds = 0;            // the chosen step's modeled time (ir::CostModel)
  double keep_all_modeled_seconds = 0;   // the keep-everything step's
  // The modeled recomputation time: what the chosen step takes beyond keeping everything.
  double recompute_seconds() const;
  std::int64_t keep_all_peak_bytes = 0;  // the planned peak when every region keeps everything
  std::int64_t least_peak_bytes = 0;  // the least planned peak of the candidates: the least budget
  std::size_t candidates = 0;         // candidates traced and planned
  double search_seconds = 0;          // their tracing and planning

  // Several lines: the budget, the policy per region and what it keeps, the peak, the
  // recomputation, the search.
  std::string str() const;
};

}  // namespace flaxpp
