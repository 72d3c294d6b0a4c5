// oneDNN's engine, streams and OpenMP threads for the CPU backend (onednn_runtime.hpp).
#include "backend/cpu/onednn_runtime.hpp"

#include <dlfcn.h>

namespace flaxpp::cpu::onednn {
namespace {

// OpenMP's thread control, found in the process (oneDNN links libgomp) rather than linked, so
// that flaxpp needs no OpenMP flags of its own compiler (clang's would bring a second runtime).
struct OpenMp {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
  int initial = 0;  // the default, before flaxpp set anything
};

const OpenMp& open_mp() {
  static const OpenMp omp = [] {
    OpenMp o;
    if (dnnl::version()->cpu_runtime != DNNL_RUNTIME_OMP) return o;
    o.set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    o.get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    if (o.set == nullptr || o.get == nullptr) return OpenMp{};
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

int use_threads(int threads) {
  const OpenMp& omp = open_mp();
  if (omp.set == nullptr) return 0;
  const int wanted = threads > 0 ? threads : omp.initial;
  if (omp.get() != wanted) omp.set(wanted);
  return wanted;
}

}  // namespace flaxpp::cpu::onednn
