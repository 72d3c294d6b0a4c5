// The CPU's float32 GEMM peak at 1024³, through each engine flaxpp can multiply with.
#include "cli/bench_gemm_peak.hpp"

#include <chrono>
#include <thread>

#include "cli/bench_common.hpp"
#include "flaxpp/backend/cpu.hpp"
#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax.hpp"

namespace flaxpp::cli {
namespace {

constexpr std::int64_t kSize = 1024;
constexpr std::chrono::milliseconds kIdle{300};

}  // namespace

GemmPeak measure_cpu_gemm_peak(int repeats) {
  const cpu::GemmEngineGuard guard;
  const Array a = bench_inputs(Shape{kSize, kSize}, 11).to(Device::cpu());
  const Array b = bench_inputs(Shape{kSize, kSize}, 12).to(Device::cpu());
  const ir::DotDimensionNumbers dims{{1}, {0}, {}, {}};
  std::vector<cpu::GemmEngine> engines;
  if (cpu::has_onednn()) engines.push_back(cpu::GemmEngine::onednn);
  engines.push_back(cpu::GemmEngine::blas);
  GemmPeak peak;
  for (const cpu::GemmEngine engine : engines) {
    cpu::set_gemm_engine(engine);
    // The engines run on two thread runtimes (OpenMP, OpenBLAS's own), whose idle threads keep
    // spinning for a while after their last product and take the cores from the other's. Let
    // the previous engine's threads go to sleep first (OpenBLAS's yield for about 0.1 s).
    std::this_thread::sleep_for(kIdle);
    std::vector<double> seconds;
    for (int r = 0; r < repeats + 2; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      (void)lax::dot_general(a, b, dims);  // the CPU computes before it returns
      if (r >= 2)
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double gflops = 2.0 * kSize * kSize * kSize / median(seconds) / 1e9;
    const std::string name(cpu::gemm_engine_name(engine));
    peak.engines.emplace_back(name, gflops);
    if (gflops > peak.gflops) {
      peak.gflops = gflops;
      peak.engine = name;
    }
  }
  std::this_thread::sleep_for(kIdle);  // the same for the steps that come next
  return peak;
}

}  // namespace flaxpp::cli
