// The CPU backend's parallel loop (cpu_parallel.hpp).
#include "backend/cpu/cpu_parallel.hpp"

#include <atomic>

#include "flaxpp/backend/cpu.hpp"
#ifdef FLAXPP_WITH_ONEDNN
#include "backend/cpu/onednn_runtime.hpp"
#endif

namespace flaxpp::cpu {
namespace {

std::atomic<std::int64_t> shared{0};

}  // namespace

std::int64_t shared_loops() {
  return shared.load(std::memory_order_relaxed);
}

void parallel_for(std::int64_t units, std::int64_t min_share,
                  const std::function<void(std::int64_t begin, std::int64_t end)>& body) {
#ifdef FLAXPP_WITH_ONEDNN
  if (onednn::parallel_for(units, num_threads(), min_share, body) > 1)
    shared.fetch_add(1, std::memory_order_relaxed);
#else
  (void)min_share;
  body(0, units);
#endif
}

}  // namespace flaxpp::cpu
