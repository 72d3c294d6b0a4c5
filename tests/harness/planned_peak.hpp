// A jitted step's planned peak checked against the CPU allocator's: run twice (its donated
// arguments replaced by what it returns), the peak counted from the live bytes before each call
// must be the planned one.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/transforms/jit.hpp"

namespace flaxpp::testing {

// The allocator's peak of one call of `step`, arguments included (as the plan counts them).
inline std::int64_t measured_peak(const CompiledStep& step, std::vector<Tree>& args,
                                  const std::vector<int>& donated) {
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

inline void check_planned_peak(const CompiledStep& step, std::vector<Tree> args,
                               const std::vector<int>& donated = {}) {
  const MemoryAnalysis& m = step.memory_analysis();
  CAPTURE(m.str());
  CHECK(m.exact);
  for (int call = 0; call < 2; ++call)
    CHECK(measured_peak(step, args, donated) == m.peak_bytes);
}

}  // namespace flaxpp::testing
