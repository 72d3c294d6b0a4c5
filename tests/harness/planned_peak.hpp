// A jitted step's planned peak checked against the CPU allocator's: run twice (its donated
// arguments replaced by what it returns), the peak counted from the live bytes before each call
// must be the planned one.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "flaxpp/transforms/jit.hpp"
#include "harness/measured_peak.hpp"

namespace flaxpp::testing {

inline void check_planned_peak(const CompiledStep& step, std::vector<Tree> args,
                               const std::vector<int>& donated = {}) {
  const MemoryAnalysis& m = step.memory_analysis();
  CAPTURE(m.str());
  CHECK(m.exact);
  for (int call = 0; call < 2; ++call)
    CHECK(measured_peak(step, args, donated) == m.peak_bytes);
}

}  // namespace flaxpp::testing
