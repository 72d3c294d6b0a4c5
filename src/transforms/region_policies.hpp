// The policies of checkpoint regions, chosen from outside the function that declares them:
// while a RegionPolicies is alive on a thread, each checkpoint region differentiated on that
// thread takes its policy from it instead of its own. Regions are numbered in the order they
// are first differentiated (a region inside a scanned body is one region, whatever the number
// of iterations). The budget search (remat_budget.cpp) retraces a step under one per
// candidate.
#pragma once

#include <cstddef>
#include <memory>
#include <unordered_map>
#include <vector>

#include "flaxpp/ir/cost_model.hpp"
#include "flaxpp/ir/graph.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/remat_plan.hpp"
#include "transforms/remat_values.hpp"

namespace flaxpp::transforms {

class RegionPolicies {
 public:
  // `chosen[i]` is region i's policy; a region beyond the list, or with a null entry, keeps
  // its own. `model` times the regions' equations (values()).
  RegionPolicies(std::vector<PolicyPtr> chosen, const ir::CostModel& model);
  ~RegionPolicies();
  RegionPolicies(const RegionPolicies&) = delete;
  RegionPolicies& operator=(const RegionPolicies&) = delete;

  // The regions seen so far, in order: each's own policy, its body, what its backward pass
  // keeps, and its values (these two empty until it is differentiated).
  const std::vector<PolicyPtr>& own() const { return own_; }
  const std::vector<std::shared_ptr<const ir::Graph>>& bodies() const { return bodies_; }
  const std::vector<std::vector<RematPlan::Kept>>& kept() const { return kept_; }
  const std::vector<RegionValues>& values() const { return values_; }

  // The policy region `e` (a checkpoint equation) is differentiated with: the active scope's
  // choice, or its own policy where there is no scope.
  static PolicyPtr policy_of(const ir::Eqn& e);
  // The active scope on this thread, if any: only then is what a region keeps worth working
  // out (a plain differentiation skips it).
  static RegionPolicies* active();
  const ir::CostModel& cost_model() const { return model_; }
  // Records what the backward pass of the region with this body keeps, and its values.
  void note_kept(const ir::Graph* body, std::vector<RematPlan::Kept> kept, RegionValues values);

 private:
  std::vector<PolicyPtr> chosen_;
  std::vector<PolicyPtr> own_;
  std::vector<std::shared_ptr<const ir::Graph>> bodies_;
  std::vector<std::vector<RematPlan::Kept>> kept_;
  std::vector<RegionValues> values_;
  ir::CostModel model_;
  std::unordered_map<const ir::Graph*, std::size_t> ordinal_;  // by the region's body
  RegionPolicies* outer_;
};

}  // namespace flaxpp::transforms
