// cond_p's differentiation (cond_ad.cpp), which cond.cpp registers: its reverse rule, its
// split for a region's policy, and its VJP rule; and where its branches are kept.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "flaxpp/transforms/tape.hpp"

namespace flaxpp::transforms {

// The param holding branch `k` of a cond equation, and that branch.
std::string cond_branch_param(std::int64_t k);
const ir::Graph& cond_branch(const ir::Params& params, std::int64_t k);

// The reverse rule: the cond split into the cond that computes the residuals the chosen
// branch's backward reads and the cond that computes its results from them, whose VJP is the
// cond of the branches' backward parts (JAX's _cond_partial_eval); a cond no tangent reaches
// is a plain equation.
std::unique_ptr<TapeEntry> replay_cond(const ir::Eqn& e, std::vector<Array> ins,
                                       TangentSet& tangents);
// The same split inside a checkpoint region, each branch linearised under the region's policy
// (JAX's _cond_partial_eval_custom): the residual cond computes what the policy saves inside
// the branches, which the region keeps (is_residual_cond).
void split_cond(const ir::Eqn& e, const PolicyPtr& policy, ir::Graph& into);
bool is_residual_cond(const ir::Eqn& e);
// The VJP rule: a split cond's by its branches' backward parts; any other cond is split first.
std::vector<Array> cond_vjp(const ir::VjpArgs& args);

}  // namespace flaxpp::transforms
