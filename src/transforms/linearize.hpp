// A function split for reverse mode (private to the transforms layer): its joint
// forward/backward graph split by partial evaluation into the forward graph (primals ->
// outputs, known cotangents, residuals) and the backward graph (residuals, cotangents -> input
// cotangents). CompiledVjp runs it; saved_residuals reports what it keeps.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "flaxpp/transforms/trace.hpp"
#include "transforms/partial_eval.hpp"

namespace flaxpp {

// Built once for given input avals; immutable afterwards, so calls share it.
struct Linearized {
  transforms::PartialEvalResult pe;
  std::vector<bool> nonzero;         // per primal: has a cotangent
  std::vector<bool> differentiable;  // per primal: as the caller marked it
  std::size_t num_outputs = 0;
  std::vector<AVal> primal_avals, output_avals;
  // Per output of the backward graph: the primal it is the cotangent of.
  std::vector<std::size_t> unknown_input;
  // Where CompiledVjp::on placed the constants (zero cotangents are made there too).
  std::optional<Device> device;
};

// f linearized at inputs of `primal_avals`; inputs marked false in `differentiable` (empty:
// all true) get no cotangent.
Linearized linearize(const ArrayFn& f, std::span<const AVal> primal_avals,
                     std::vector<bool> differentiable);

}  // namespace flaxpp
