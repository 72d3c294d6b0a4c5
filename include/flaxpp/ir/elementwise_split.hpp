// flaxpp/ir/elementwise_split.hpp — an ElementwiseProgram cut into stages that each fit a
// backend's limits (a CUDA launch carries at most so many instructions and 0-d operands in its
// parameters). Values one stage computes and a later one reads travel through arrays of the
// program's dtype; since every operation of a program rounds its result to that dtype, the
// stages give the unsplit program's bits. Backends run the stages in order
// (src/backend/fused_stages.hpp), so a program that runs on the CPU runs everywhere.
#pragma once

#include <memory>
#include <vector>

#include "flaxpp/ir/elementwise_program.hpp"

namespace flaxpp::ir {

struct ElementwiseLimits {
  int max_code;     // instructions per program
  int max_scalars;  // 0-d operands per program
};

// Whether `program` fits `limits` as it is.
bool fits(const ElementwiseProgram& program, const ElementwiseLimits& limits);

// One stage: a program, where its operands come from, and which results it makes. The arrays
// the stages make are numbered in order over all stages (stage 0's results first).
struct ElementwiseStage {
  std::shared_ptr<const ElementwiseProgram> program;
  std::vector<int> scalars;  // per 0-d operand: the split program's 0-d operand number
  struct Source {
    bool made;  // true: an array an earlier stage made (its number); false: the program's input
    int index;
  };
  std::vector<Source> inputs;  // per per-array operand
};

struct SplitProgram {
  std::vector<ElementwiseStage> stages;
  // Per result of the split program: the number of the made array that holds it.
  std::vector<int> results;
};

// Cuts `program` into stages within `limits`, in its instruction order, each as long as the
// limits allow. The stages alias nothing (their results take new buffers). Throws ValueError
// where no cut fits (limits below one instruction's needs).
SplitProgram split_program(const ElementwiseProgram& program, const ElementwiseLimits& limits);

}  // namespace flaxpp::ir
