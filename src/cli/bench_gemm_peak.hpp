// The machine's float32 GEMM peak for `flaxpp bench`: what the CPU reaches on a large product,
// measured in the bench's own process and independently of the engine flaxpp's products use,
// so that a step's product rate can be read against it.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace flaxpp::cli {

struct GemmPeak {
  double gflops = 0;                                    // the fastest engine's
  std::string engine;                                   // which one it was
  std::vector<std::pair<std::string, double>> engines;  // each engine's GFLOP/s
};

// Each float32 engine of this build (oneDNN where built with it, and the BLAS) multiplies two
// 1024×1024 matrices `repeats` times after two warm-ups, on the CPU; an engine's rate is that of
// its median time, and the peak is the faster engine's. The process's engine is restored, and
// the idle threads of both have gone to sleep when it returns (0.3 s after each engine).
GemmPeak measure_cpu_gemm_peak(int repeats);

}  // namespace flaxpp::cli
