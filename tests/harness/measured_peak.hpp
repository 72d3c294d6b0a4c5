// A jitted step's peak measured by the CPU allocator (tests/harness/planned_peak.hpp checks it
// against the plan; tests/dist/dist_probe.cpp on every rank of a data-parallel job).
#pragma once

#include <cstdint>
#include <vector>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/transforms/jit.hpp"

namespace flaxpp::testing {

// The allocator's peak of one call of `step`, arguments included (as the plan counts them).
// The arguments `donated` names are replaced by the results the call wrote into them.
inline std::int64_t measured_peak(const CompiledStep& step, std::vector<Tree>& args,
                                  const std::vector<int>& donated = {}) {
  Backend& be = backend(Device::cpu());
  const std::int64_t before = be.memory_stats().live_bytes;
  be.reset_peak_memory();
  std::vector<Tree> out = step(args);
  // The arguments and the step's constants were live before the call; the plan counts them
  // once.
  const std::int64_t peak =
      be.memory_stats().peak_bytes - before + step.memory_analysis().resident_bytes();
  for (std::size_t k = 0; k < donated.size(); ++k)
    args[static_cast<std::size_t>(donated[k])] = std::move(out[k]);
  return peak;
}

}  // namespace flaxpp::testing
