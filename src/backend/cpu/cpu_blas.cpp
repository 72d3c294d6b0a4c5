// Loads the configured BLAS with dlopen and resolves its two CBLAS entry points; see
// cpu_blas.hpp for why flaxpp loads it rather than links it.
#include "backend/cpu/cpu_blas.hpp"

#include <dlfcn.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>

#include "flaxpp/core/error.hpp"

#ifndef FLAXPP_BLAS_LIBRARY
#error "FLAXPP_BLAS_LIBRARY (the BLAS that CMake found) must be defined"
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

// AMD family 19h (Zen 3 and Zen 4) with AVX-512F, which only Zen 4 has.
bool is_zen4() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  if (std::strcmp(vendor, "AuthenticAMD") != 0) return false;
  __get_cpuid(1, &eax, &ebx, &ecx, &edx);
  const unsigned family = ((eax >> 8) & 0xf) + ((eax >> 20) & 0xff);
  if (family != 0x19) return false;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (ebx & (1u << 16)) != 0;
#else
  return false;
#endif
}

template <class F>
F symbol(void* handle, const char* name, const std::string& library) {
  void* p = dlsym(handle, name);
  if (p == nullptr)
    throw DeviceError(detail::str("the BLAS library ", library, " has no ", name,
                                  "; flaxpp needs a BLAS with the CBLAS interface (OpenBLAS: "
                                  "apt-get install libopenblas-dev) or FLAXPP_BLAS naming one"));
  return reinterpret_cast<F>(p);
}

Blas load() {
  const char* chosen = std::getenv("FLAXPP_BLAS");
  const std::string library = chosen != nullptr && *chosen != '\0' ? chosen : FLAXPP_BLAS_LIBRARY;
  // Before the library's constructor reads it; a no-op where the user set it or where another
  // part of the process loaded OpenBLAS already.
  if (is_zen4()) setenv("OPENBLAS_CORETYPE", "Haswell", /*overwrite=*/0);
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    throw DeviceError(detail::str("cannot load the BLAS library ", library, " (", dlerror(),
                                  "); install it (apt-get install libopenblas-dev) or set "
                                  "FLAXPP_BLAS to a BLAS library with the CBLAS interface"));
  const auto sgemm = symbol<Blas::Sgemm>(handle, "cblas_sgemm", library);
  const auto dgemm = symbol<Blas::Dgemm>(handle, "cblas_dgemm", library);
  std::string kernels;
  if (void* corename = dlsym(handle, "openblas_get_corename"))
    kernels = reinterpret_cast<const char* (*)()>(corename)();
  return Blas(sgemm, dgemm, library, kernels);
}

}  // namespace

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
