// UpdateBuilder: an optimiser update as per-leaf code, run as fused_elementwise once per dtype.
#include "flaxpp/optim/update_builder.hpp"

#include <map>

#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/optim/transform.hpp"

namespace flaxpp::optim {
namespace {

std::vector<std::string> paths_of(const Tree& t) {
  std::vector<std::string> paths;
  for (const auto& [path, leaf] : t.flatten())
    paths.push_back(path);
  return paths;
}

}  // namespace

UpdateBuilder::UpdateBuilder(Tree updates, Tree params)
    : structure_(updates.with_leaves(std::vector<Array>(updates.leaves().size()))),
      paths_(paths_of(updates)),
      params_tree_(std::move(params)) {
  const Tree& params_tree = params_tree_;
  // No params (optax's params=None) is fine until a transformation reads them.
  if (!params_tree.leaves().empty() && paths_of(params_tree) != paths_)
    throw ValueError(
        "an optimiser update needs updates of the params' structure (the same leaf paths); "
        "pass the gradients of the params being trained");
  start_stage(std::move(updates));
}

void UpdateBuilder::start_stage(Tree updates) {
  // A value of an earlier stage must fail check() clearly, not point at a freed builder.
  if (code_) retired_.push_back(std::move(code_));
  code_ = std::make_unique<ir::ElementwiseBuilder>();
  inputs_.clear();
  scalars_.clear();
  stored_outputs_.clear();
  params_loaded_ = false;
  update_input_ = update_ = code_->input();
  inputs_.push_back(updates.leaves());
  updates = Tree();  // the builder's references only
}

void UpdateBuilder::set_update(EValue v) {
  update_ = v;
}

EValue UpdateBuilder::params() {
  if (!params_loaded_) {
    if (params_tree_.leaves().empty() && !paths_.empty())
      throw ValueError(
          "this optimiser reads the parameters (e.g. add_decayed_weights); pass them to update");
    params_ = load(params_tree_);
    params_loaded_ = true;
  }
  return params_;
}

EValue UpdateBuilder::load(const Tree& tree) {
  if (paths_of(tree) != paths_)
    throw ValueError(
        "an optimiser state tree must have the params' structure (the same leaf paths); was the "
        "state made by this optimiser's init for these params?");
  inputs_.push_back(tree.leaves());
  return code_->input();
}

EValue UpdateBuilder::scalar(const Array& value) {
  if (value.rank() != 0)
    throw ValueError(detail::str("UpdateBuilder::scalar takes a 0-d array, got ", value.aval()));
  scalars_.push_back(value);
  return code_->scalar();
}

EValue UpdateBuilder::global_norm() {
  if (update_.id() != update_input_.id()) {
    // The running update is code so far: run it, and go on from its result.
    const int out = code_->output(update_);
    stored_outputs_.push_back(-1);
    const std::vector<std::vector<Array>> leaves = run_stage_outputs();
    start_stage(structure_.with_leaves(leaves[static_cast<std::size_t>(out)]));
  }
  return scalar(optim::global_norm(structure_.with_leaves(inputs_.front())));
}

int UpdateBuilder::store(EValue v, EValue replaces) {
  FLAXPP_ASSERT(!spent_, "UpdateBuilder used after run()");
  code_->output(v, replaces);
  const int slot = static_cast<int>(results_.size());
  results_.emplace_back();
  stored_outputs_.push_back(slot);
  return slot;
}

void UpdateBuilder::run_program(std::vector<std::vector<Array>>& outputs) {
  const std::size_t num_outputs = program_->outputs.size();
  // One fused_elementwise per dtype: the leaves of each, with every operand in that dtype.
  std::map<DType, std::vector<std::size_t>> by_dtype;
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    const DType dtype = inputs_.front()[i].dtype();
    for (const std::vector<Array>& input : inputs_)
      if (input[i].dtype() != dtype)
        throw ValueError(detail::str("optimiser update of \"", paths_[i],
                                     "\": its update, parameter and state leaves must have one "
                                     "dtype; got ",
                                     inputs_.front()[i].aval(), " and ", input[i].aval()));
    by_dtype[dtype].push_back(i);
  }
  for (const auto& [dtype, group] : by_dtype) {
    // The scalars in the leaves' dtype and on their device (a host count's learning rate for
    // GPU leaves): operands on another device would be copied with the leaves, which would
    // then be shared and not donated.
    const Array& like = inputs_.front()[group.front()];
    std::vector<Array> scalars;
    for (const Array& s : scalars_) {
      Array c = s.dtype() == dtype ? s : lax::convert_element_type(s, dtype);
      scalars.push_back(c.is_traced() || like.is_traced() ? c : c.to(like.device()));
    }
    // Moved, so that a leaf nothing else holds is the operands' alone: donated.
    std::vector<Array> operands;
    for (const std::size_t i : group)
      for (std::vector<Array>& input : inputs_)
        operands.push_back(std::move(input[i]));
    std::vector<Array> results =
        lax::fused_elementwise_donated(program_, scalars, std::move(operands));
    for (std::size_t j = 0; j < group.size(); ++j)
      for (std::size_t o = 0; o < num_outputs; ++o)
        outputs[o][group[j]] = std::move(results[j * num_outputs + o]);
  }
}

std::vector<std::vector<Array>> UpdateBuilder::run_stage_outputs() {
  program_ = code_->finish();
  const std::size_t num_leaves = paths_.size();
  std::vector<std::vector<Array>> outputs(program_->outputs.size(), std::vector<Array>(num_leaves));
  run_program(outputs);
  // Stored values go to their slots; the inputs are released.
  for (std::size_t o = 0; o < outputs.size(); ++o)
    if (const int slot = stored_outputs_[o]; slot >= 0)
      results_[static_cast<std::size_t>(slot)] = outputs[o];
  inputs_.clear();
  scalars_.clear();
  return outputs;
}

UpdateResults UpdateBuilder::results() const {
  UpdateResults r;
  for (const std::vector<Array>& leaves : results_)
    r.trees_.push_back(structure_.with_leaves(leaves));
  return r;
}

UpdateResults UpdateBuilder::run() {
  FLAXPP_ASSERT(!spent_, "UpdateBuilder::run called twice");
  params_tree_ = Tree();  // loaded already if needed; unloaded params stay with their owner
  run_stage_outputs();
  spent_ = true;
  return results();
}

}  // namespace flaxpp::optim
