// The CPU backend's BLAS: the library CMake found, loaded on first use rather than linked, so
// that FLAXPP_BLAS can name another one at run time. float64 products always run on it, and
// float32 products where oneDNN is absent or FLAXPP_CPU_GEMM=blas
// (include/flaxpp/backend/cpu.hpp).
//
// OpenBLAS chooses its kernels once, when it is loaded, from the CPU and the environment
// variable OPENBLAS_CORETYPE; flaxpp leaves that variable to the user.
#pragma once

namespace flaxpp::cpu {

enum class Transpose : bool { kNo = false, kYes = true };

// Row-major C = A·B (A: m×k, B: k×n, each possibly stored transposed), overwriting C.
class Blas {
 public:
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
  using Dgemm = void (*)(int, int, int, int, int, int, double, const double*, int, const double*,
                         int, double, double*, int);

  using SetThreads = void (*)(int);
  using GetThreads = int (*)();

  Blas(Sgemm sgemm, Dgemm dgemm, SetThreads set_threads, GetThreads get_threads);

  void gemm(Transpose ta, Transpose tb, int m, int n, int k, const float* a, int lda,
            const float* b, int ldb, float* c, int ldc) const;
  void gemm(Transpose ta, Transpose tb, int m, int n, int k, const double* a, int lda,
            const double* b, int ldb, double* c, int ldc) const;

  // Asks the library for `threads` threads (0: its default, as it was when it was loaded)
  // where it has OpenBLAS's openblas_set_num_threads; other libraries keep their own.
  void use_threads(int threads) const;

 private:
  Sgemm sgemm_;             // cblas_sgemm
  Dgemm dgemm_;             // cblas_dgemm
  SetThreads set_threads_;  // openblas_set_num_threads, or null
  GetThreads get_threads_;  // openblas_get_num_threads, or null
  int initial_threads_;
};

// The BLAS, loaded on the first call (thread-safe). Throws DeviceError naming the library
// and FLAXPP_BLAS when it cannot be loaded or lacks cblas_sgemm/cblas_dgemm.
const Blas& blas();

}  // namespace flaxpp::cpu
