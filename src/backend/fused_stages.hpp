// Running a fused_elementwise whose program is over a backend's limits as the stages of
// ir::split_program, in order, each within them: the same results (bits included) from
// several launches. Shared by every backend with limits (CUDA's launch parameters), tested on
// the CPU.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/aval.hpp"
#include "flaxpp/ir/elementwise_split.hpp"

namespace flaxpp::backend_impl {

// Runs one program within the limits: fused_elementwise's operands (0-d ones first, then
// groups of the program's per-array operands) and results, without donation.
using RunProgram = std::function<std::vector<Array>(
    const ir::ElementwiseProgram& program, std::span<const Array> in, std::span<const AVal> out)>;

// fused_elementwise of `program` on `in` (its results' avals `out`), as the stages of `split`
// (split_program(program, ...)) run by `run`; a value the stages carry is freed after its last
// reader. The results take new buffers: no operand is donated, so parameters updated by such a
// program move from call to call (a train step with it is not replayed as a CUDA graph).
std::vector<Array> run_in_stages(const ir::ElementwiseProgram& program,
                                 const ir::SplitProgram& split, std::span<const Array> in,
                                 std::span<const AVal> out, const RunProgram& run);

}  // namespace flaxpp::backend_impl
