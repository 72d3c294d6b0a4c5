// Restores the process's CPU product engine and thread count (flaxpp/backend/cpu.hpp) when a
// test that changes them ends, also when it fails.
#pragma once

#include "flaxpp/backend/cpu.hpp"

namespace flaxpp::testing {

class CpuSettingsGuard {
 public:
  CpuSettingsGuard() : engine_(cpu::gemm_engine()), threads_(cpu::num_threads()) {}
  ~CpuSettingsGuard() {
    cpu::set_gemm_engine(engine_);
    cpu::set_num_threads(threads_);
  }
  CpuSettingsGuard(const CpuSettingsGuard&) = delete;
  CpuSettingsGuard& operator=(const CpuSettingsGuard&) = delete;

 private:
  cpu::GemmEngine engine_;
  int threads_;
};

}  // namespace flaxpp::testing
