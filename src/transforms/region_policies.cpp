#include "transforms/region_policies.hpp"

#include <memory>
#include <utility>

namespace flaxpp::transforms {
namespace {
thread_local RegionPolicies* active_scope = nullptr;
}  // namespace

RegionPolicies::RegionPolicies(std::vector<PolicyPtr> chosen, const ir::CostModel& model)
    : chosen_(std::move(chosen)), model_(model), outer_(active_scope) {
  active_scope = this;
}

RegionPolicies::~RegionPolicies() {
  active_scope = outer_;
}

PolicyPtr RegionPolicies::policy_of(const ir::Eqn& e) {
  PolicyPtr own = e.params.get<PolicyPtr>("policy");
  RegionPolicies* scope = active_scope;
  if (scope == nullptr) return own;
  const auto& body = e.params.get<std::shared_ptr<const ir::Graph>>("jaxpr");
  const auto [it, first] = scope->ordinal_.emplace(body.get(), scope->own_.size());
  if (first) {
    scope->own_.push_back(own);
    scope->bodies_.push_back(body);
    scope->kept_.emplace_back();
    scope->values_.emplace_back();
  }
  const std::size_t i = it->second;
  return i < scope->chosen_.size() && scope->chosen_[i] != nullptr ? scope->chosen_[i] : own;
}

RegionPolicies* RegionPolicies::active() {
  return active_scope;
}

void RegionPolicies::note_kept(const ir::Graph* body, std::vector<RematPlan::Kept> kept,
                               RegionValues values) {
  if (const auto it = ordinal_.find(body); it != ordinal_.end()) {
    kept_[it->second] = std::move(kept);
    values_[it->second] = std::move(values);
  }
}

}  // namespace flaxpp::transforms
