// Loads the configured BLAS with dlopen and resolves its two CBLAS entry points; see
// cpu_blas.hpp for why flaxpp loads it rather than links it.
#include "backend/cpu/cpu_blas.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "flaxpp/core/error.hpp"

#if !defined(FLAXPP_BLAS_LIBRARY) || !defined(FLAXPP_BLAS_SONAME)
#error "FLAXPP_BLAS_LIBRARY and FLAXPP_BLAS_SONAME (the BLAS that CMake found) must be defined"
#endif

namespace flaxpp::cpu {
namespace {

// CBLAS's enumerators (cblas.h); their values are fixed by the CBLAS standard.
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;
constexpr int kTrans = 112;

int trans(Transpose t) {
  return t == Transpose::kYes ? kTrans : kNoTrans;
}

// Where the library to load comes from, for messages.
struct Source {
  std::string library;  // what dlopen is given
  bool from_environment;
};

std::string what_to_do(const Source& source) {
  return source.from_environment
             ? std::string(
                   "fix FLAXPP_BLAS (a BLAS shared library with the CBLAS interface) "
                   "or unset it to use " FLAXPP_BLAS_LIBRARY)
             : std::string(
                   "install it (apt-get install libopenblas-dev) or set FLAXPP_BLAS to a "
                   "BLAS shared library with the CBLAS interface");
}

template <class F>
F symbol(void* handle, const char* name, const Source& source) {
  void* p = dlsym(handle, name);
  if (p == nullptr)
    throw DeviceError(detail::str("the BLAS library ", source.library, " has no ", name,
                                  " (flaxpp calls BLAS through its CBLAS interface); ",
                                  what_to_do(source)));
  return reinterpret_cast<F>(p);
}

// dlopen of the configured library: by its SONAME first (found as the dynamic linker would),
// else by the path CMake found.
void* open_configured(std::string& tried, std::string& error) {
  for (const char* name : {FLAXPP_BLAS_SONAME, FLAXPP_BLAS_LIBRARY}) {
    if (*name == '\0') continue;
    tried = name;
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
    error = dlerror();
  }
  return nullptr;
}

Blas load() {
  const char* chosen = std::getenv("FLAXPP_BLAS");
  Source source{"", chosen != nullptr && *chosen != '\0'};
  std::string error;
  void* handle = nullptr;
  if (source.from_environment) {
    source.library = chosen;
    handle = dlopen(chosen, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) error = dlerror();
  } else {
    handle = open_configured(source.library, error);
  }
  if (handle == nullptr)
    throw DeviceError(detail::str("cannot load the BLAS library ", source.library, " (", error,
                                  "); ", what_to_do(source)));
  try {
    // flaxpp passes 32-bit integers, as cblas.h declares them; an ILP64 OpenBLAS with the
    // same symbol names would read garbage.
    if (void* config = dlsym(handle, "openblas_get_config"))
      if (std::strstr(reinterpret_cast<const char* (*)()>(config)(), "USE64BITINT") != nullptr)
        throw DeviceError(detail::str("the BLAS library ", source.library,
                                      " is built with 64-bit integers (ILP64); flaxpp calls the "
                                      "32-bit-integer CBLAS interface: ",
                                      what_to_do(source)));
    return Blas(symbol<Blas::Sgemm>(handle, "cblas_sgemm", source),
                symbol<Blas::Dgemm>(handle, "cblas_dgemm", source),
                reinterpret_cast<Blas::SetThreads>(dlsym(handle, "openblas_set_num_threads")),
                reinterpret_cast<Blas::GetThreads>(dlsym(handle, "openblas_get_num_threads")));
  } catch (...) {
    dlclose(handle);
    throw;
  }
}

}  // namespace

Blas::Blas(Sgemm sgemm, Dgemm dgemm, SetThreads set_threads, GetThreads get_threads)
    : sgemm_(sgemm),
      dgemm_(dgemm),
      set_threads_(get_threads == nullptr ? nullptr : set_threads),
      get_threads_(set_threads == nullptr ? nullptr : get_threads),
      initial_threads_(get_threads_ == nullptr ? 0 : get_threads_()) {}

void Blas::use_threads(int threads) const {
  if (set_threads_ == nullptr) return;
  const int wanted = threads > 0 ? threads : initial_threads_;
  if (get_threads_() != wanted) set_threads_(wanted);
}

void Blas::gemm(Transpose ta, Transpose tb, int m, int n, int k, const float* a, int lda,
                const float* b, int ldb, float* c, int ldc) const {
  sgemm_(kRowMajor, trans(ta), trans(tb), m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

void Blas::gemm(Transpose ta, Transpose tb, int m, int n, int k, const double* a, int lda,
                const double* b, int ldb, double* c, int ldc) const {
  dgemm_(kRowMajor, trans(ta), trans(tb), m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

const Blas& blas() {
  static const Blas loaded = load();
  return loaded;
}

}  // namespace flaxpp::cpu
