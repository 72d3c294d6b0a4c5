// The CPU product settings: the environment's defaults, then what the program sets.
#include "backend/cpu/cpu_gemm_settings.hpp"

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <string>

#include "flaxpp/core/error.hpp"
#ifdef FLAXPP_WITH_ONEDNN
#include "backend/cpu/cpu_onednn.hpp"
#endif

namespace flaxpp::cpu {
namespace {

constexpr GemmEngine kDefaultEngine =
#ifdef FLAXPP_WITH_ONEDNN
    GemmEngine::onednn;
#else
    GemmEngine::blas;
#endif

GemmEngine engine_from_environment() {
  const char* value = std::getenv("FLAXPP_CPU_GEMM");
  if (value == nullptr || *value == '\0') return kDefaultEngine;
  const std::string_view name(value);
  if (name == "blas") return GemmEngine::blas;
  if (name == "onednn") {
    if (!has_onednn())
      throw ValueError(
          "FLAXPP_CPU_GEMM=onednn, but this flaxpp was built without oneDNN; install it "
          "(apt-get install libdnnl-dev) and rebuild, or set FLAXPP_CPU_GEMM=blas");
    return GemmEngine::onednn;
  }
  throw ValueError(detail::str("FLAXPP_CPU_GEMM is '", name,
                               "'; expected 'onednn' or 'blas' (the library of float32 matrix "
                               "products on the CPU), or unset it for the default"));
}

int threads_from_environment() {
  const char* value = std::getenv("FLAXPP_NUM_THREADS");
  if (value == nullptr || *value == '\0') return 0;
  const std::string_view text(value);
  int threads = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), threads);
  if (error != std::errc() || end != text.data() + text.size() || threads < 1)
    throw ValueError(detail::str("FLAXPP_NUM_THREADS is '", text,
                                 "'; expected a positive number of threads for the CPU's matrix "
                                 "products, or unset it for one per core"));
  return threads;
}

struct State {
  std::once_flag read;
  std::atomic<GemmEngine> engine{kDefaultEngine};
  std::atomic<int> threads{0};
};

State& state() {
  static State s;
  return s;
}

// The environment's values, once; a later set_* wins over them.
State& initialised() {
  State& s = state();
  std::call_once(s.read, [&] {
    s.engine = engine_from_environment();
    s.threads = threads_from_environment();
  });
  return s;
}

}  // namespace

std::string_view gemm_engine_name(GemmEngine engine) {
  return engine == GemmEngine::onednn ? "onednn" : "blas";
}

bool has_onednn() {
#ifdef FLAXPP_WITH_ONEDNN
  return true;
#else
  return false;
#endif
}

std::int64_t onednn_convolutions() {
#ifdef FLAXPP_WITH_ONEDNN
  return onednn_conv_runs();
#else
  return 0;
#endif
}

std::int64_t onednn_strided_products() {
#ifdef FLAXPP_WITH_ONEDNN
  return onednn_strided_gemm_runs();
#else
  return 0;
#endif
}

GemmEngine gemm_engine() {
  return initialised().engine;
}

void set_gemm_engine(GemmEngine engine) {
  if (engine == GemmEngine::onednn && !has_onednn())
    throw ValueError(
        "set_gemm_engine(onednn): this flaxpp was built without oneDNN; install it (apt-get "
        "install libdnnl-dev) and rebuild, or keep GemmEngine::blas");
  initialised().engine = engine;
}

int num_threads() {
  return initialised().threads;
}

void set_num_threads(int threads) {
  if (threads < 0)
    throw ValueError(detail::str("set_num_threads(", threads,
                                 "): expected a positive number of threads, or 0 for the "
                                 "libraries' defaults (one per core)"));
  initialised().threads = threads;
}

GemmSettings gemm_settings() {
  const State& s = initialised();
  return {s.engine, s.threads};
}

}  // namespace flaxpp::cpu
