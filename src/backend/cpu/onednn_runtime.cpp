// oneDNN's engine, streams and OpenMP threads for the CPU backend (onednn_runtime.hpp).
#include "backend/cpu/onednn_runtime.hpp"

#include <dlfcn.h>

#include <algorithm>

namespace flaxpp::cpu::onednn {
namespace {

// OpenMP's thread control, found in the process (oneDNN links libgomp) rather than linked, so
// that flaxpp needs no OpenMP flags of its own compiler (clang's would bring a second runtime).
struct OpenMp {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
  // A parallel region as GCC compiles `#pragma omp parallel` (libgomp's ABI), and the thread's
  // place in it.
  void (*parallel)(void (*fn)(void*), void* data, unsigned threads, unsigned flags) = nullptr;
  int (*thread_num)() = nullptr;
  int (*team_size)() = nullptr;
  int initial = 0;  // the default, before flaxpp set anything
};

const OpenMp& open_mp() {
  static const OpenMp omp = [] {
    OpenMp o;
    if (dnnl::version()->cpu_runtime != DNNL_RUNTIME_OMP) return o;
    o.set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    o.get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    o.parallel = reinterpret_cast<decltype(o.parallel)>(dlsym(RTLD_DEFAULT, "GOMP_parallel"));
    o.thread_num = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_thread_num"));
    o.team_size = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_num_threads"));
    if (o.set == nullptr || o.get == nullptr || o.parallel == nullptr || o.thread_num == nullptr ||
        o.team_size == nullptr)
      return OpenMp{};
    o.initial = o.get();
    return o;
  }();
  return omp;
}

}  // namespace

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

std::int64_t parallel_for(std::int64_t units, int threads, std::int64_t min_share,
                          const std::function<void(std::int64_t begin, std::int64_t end)>& body) {
  const OpenMp& omp = open_mp();
  const std::int64_t shares = std::min<std::int64_t>(threads > 0 ? threads : omp.initial,
                                                     units / std::max<std::int64_t>(min_share, 1));
  if (omp.parallel == nullptr || shares < 2) {
    body(0, units);
    return 1;
  }
  struct Region {
    const OpenMp& omp;
    std::int64_t units;
    const std::function<void(std::int64_t, std::int64_t)>& body;
  } region{omp, units, body};
  omp.parallel(
      [](void* data) {
        const Region& r = *static_cast<const Region*>(data);
        const std::int64_t team = r.omp.team_size(), me = r.omp.thread_num();
        const std::int64_t begin = r.units * me / team, end = r.units * (me + 1) / team;
        if (begin < end) r.body(begin, end);
      },
      &region, static_cast<unsigned>(shares), 0);
  return shares;
}

int use_threads(int threads) {
  const OpenMp& omp = open_mp();
  if (omp.set == nullptr) return 0;
  const int wanted = threads > 0 ? threads : omp.initial;
  if (omp.get() != wanted) omp.set(wanted);
  return wanted;
}

}  // namespace flaxpp::cpu::onednn
