// flaxpp/optim/update_builder.hpp — how a gradient transformation writes its update once, as
// per-element code (ir::ElementwiseProgram), so that a chain of transformations and
// apply_updates run as one fused_elementwise pass over each dtype's leaves (one CUDA kernel per
// dtype) instead of one primitive per operation per leaf. The results have the bits of the
// same operations applied one primitive at a time (optax's formulas, weak-typed constants).
//
// A transformation's emitter reads the running update (update()), the parameters (params())
// and its per-leaf state (load(tree)) as Values, writes the next update (set_update), keeps
// new per-leaf state (store), and returns how to assemble its new state tree once the program
// has run. State that is not per leaf (optax's count) is computed with as Array code and
// enters the program through scalar(), so an update traces under jit like any other code.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "flaxpp/core/error.hpp"
#include "flaxpp/core/tree.hpp"
#include "flaxpp/ir/elementwise_program.hpp"

namespace flaxpp::optim {

using ir::EValue;

// The trees a finished update produced: tree(slot) for each store().
class UpdateResults {
 public:
  Tree tree(int slot) const { return trees_.at(static_cast<std::size_t>(slot)); }

 private:
  friend class UpdateBuilder;
  std::vector<Tree> trees_;
};

class UpdateBuilder {
 public:
  // Builds the update of `updates` (the gradients) for `params`: both one structure, each
  // leaf of one floating dtype as its parameter (params may be empty when no transformation
  // reads them).
  // The builder takes its own references: trees moved in, and state trees whose other
  // references are dropped before run(), are donated (updated in place where nothing else
  // holds a leaf).
  UpdateBuilder(Tree updates, Tree params);
  UpdateBuilder(const UpdateBuilder&) = delete;
  UpdateBuilder& operator=(const UpdateBuilder&) = delete;

  // The running update of a leaf (the gradient, then each transformation's result).
  EValue update() const { return update_; }
  void set_update(EValue v);
  // The parameter leaf.
  EValue params();
  // The leaf of a per-leaf state tree (its structure the params').
  EValue load(const Tree& tree);
  // A 0-d array, the same for every leaf (converted to each leaf's dtype).
  EValue scalar(const Array& value);
  EValue constant(double value) { return code_->constant(value); }
  // The global norm of the running update (optax.global_norm over all leaves). When update()
  // is no longer the input it was, the program so far runs first, to give it as an array:
  // values taken before then belong to that program and cannot be used after it.
  EValue global_norm();
  // Keeps `v` of every leaf; UpdateResults::tree(slot) gives it as a tree of params' structure.
  // `replaces` (a load()ed or params() value) names the old value `v` supersedes: a donated
  // leaf of it gives `v` its buffer, so parameters and state keep their addresses.
  int store(EValue v, EValue replaces = {});
  // Runs the program; the builder is spent. Leaves nothing else holds take results in place.
  UpdateResults run();

 private:
  void start_stage(Tree updates);
  // Runs this stage's program; returns each output's leaves.
  std::vector<std::vector<Array>> run_stage_outputs();
  // Runs program_ over every leaf (moving their operands out): outputs[o][leaf].
  void run_program(std::vector<std::vector<Array>>& outputs);
  UpdateResults results() const;

  Tree structure_;  // the updates' (and params') structure
  std::vector<std::string> paths_;
  Tree params_tree_;
  std::unique_ptr<ir::ElementwiseBuilder> code_;
  std::vector<std::unique_ptr<ir::ElementwiseBuilder>> retired_;  // earlier stages'
  EValue update_, update_input_, params_;
  bool params_loaded_ = false;
  std::vector<std::vector<Array>> inputs_;  // per input: its leaves
  std::vector<Array> scalars_;
  std::vector<int> stored_outputs_;          // this stage's outputs -> their slots (-1: not stored)
  std::vector<std::vector<Array>> results_;  // per slot: its leaves once run
  std::shared_ptr<const ir::ElementwiseProgram> program_;
  bool spent_ = false;
};


// What an emitter returns: the transformation's new state from the program's results.
using StateFn = std::function<Tree(const UpdateResults& results)>;
// A transformation's update as code: emit(builder, state).
using Emitter = std::function<StateFn(UpdateBuilder& b, const Tree& state)>;

}  // namespace flaxpp::optim
