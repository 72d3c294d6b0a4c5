#include "transforms/region_policies.hpp"

#include <memory>
#include <utility>

namespace flaxpp::transforms {
namespace {
thread_local RegionPolicies* active_scope = nullptr;
}  // namespace

RegionPolicies::RegionPolicies(std::vector<PolicyPtr> chosen)
    : chosen_(std::move(chosen)), outer_(active_scope) {
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
  }
  const std::size_t i = it->second;
  return i < scope->chosen_.size() && scope->chosen_[i] != nullptr ? scope->chosen_[i] : own;
}

bool RegionPolicies::active() {
  return active_scope != nullptr;
}

void RegionPolicies::note_kept(const ir::Graph* body, std::vector<RematPlan::Kept> kept) {
  RegionPolicies* scope = active_scope;
  if (scope == nullptr) return;
  if (const auto it = scope->ordinal_.find(body); it != scope->ordinal_.end())
    scope->kept_[it->second] = std::move(kept);
}

}  // namespace flaxpp::transforms
