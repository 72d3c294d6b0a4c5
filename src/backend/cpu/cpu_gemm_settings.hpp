// Private to the CPU backend: the settings of include/flaxpp/backend/cpu.hpp as the product
// kernels read them.
#pragma once

#include "flaxpp/backend/cpu.hpp"

namespace flaxpp::cpu {

struct GemmSettings {
  GemmEngine engine;  // of float32 products
  int threads;        // 0: the libraries' defaults
};

// The current settings: the environment's (FLAXPP_CPU_GEMM, FLAXPP_NUM_THREADS), read on the
// first call, until set_gemm_engine or set_num_threads changes them. Throws ValueError, naming
// the variable, for a value that is not valid.
GemmSettings gemm_settings();

}  // namespace flaxpp::cpu
