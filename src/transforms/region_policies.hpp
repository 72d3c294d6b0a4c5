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

#include "flaxpp/ir/graph.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/remat_plan.hpp"

namespace flaxpp::transforms {

class RegionPolicies {
 public:
  // `chosen[i]` is region i's policy; a region beyond the list, or with a null entry, keeps
  // its own.
  explicit RegionPolicies(std::vector<PolicyPtr> chosen);
  ~RegionPolicies();
  RegionPolicies(const RegionPolicies&) = delete;
  RegionPolicies& operator=(const RegionPolicies&) = delete;

  // The regions seen so far, in order: each's own policy, its body, and what its backward
  // pass keeps (empty until it is differentiated).
  const std::vector<PolicyPtr>& own() const { return own_; }
  const std::vector<std::shared_ptr<const ir::Graph>>& bodies() const { return bodies_; }
  const std::vector<std::vector<RematPlan::Kept>>& kept() const { return kept_; }

  // The policy region `e` (a checkpoint equation) is differentiated with: the active scope's
  // choice, or its own policy where there is no scope.
  static PolicyPtr policy_of(const ir::Eqn& e);
  // Whether a scope is active on this thread: only then is what a region keeps worth working
  // out (a plain differentiation skips it).
  static bool active();
  // Records, in the active scope (if any), what the backward pass of the region with this
  // body keeps.
  static void note_kept(const ir::Graph* body, std::vector<RematPlan::Kept> kept);

 private:
  std::vector<PolicyPtr> chosen_;
  std::vector<PolicyPtr> own_;
  std::vector<std::shared_ptr<const ir::Graph>> bodies_;
  std::vector<std::vector<RematPlan::Kept>> kept_;
  std::unordered_map<const ir::Graph*, std::size_t> ordinal_;  // by the region's body
  RegionPolicies* outer_;
};

}  // namespace flaxpp::transforms
