// The CPU backend's BLAS: the library CMake found, loaded on first use rather than linked, so
// that flaxpp can pick OpenBLAS's kernels for this CPU before OpenBLAS initialises itself.
//
// OpenBLAS chooses its kernels once, when it is loaded, from the CPU and the environment
// variable OPENBLAS_CORETYPE. On AMD Zen 4 (family 19h with AVX-512) Debian's OpenBLAS 0.3.21
// takes its Cooperlake AVX-512 kernels, which ran 10-20% slower here than its Haswell AVX2
// kernels on every matrix-product shape of an MLP step (docs/PERFORMANCE.md). Where the
// variable is unset on such a CPU, flaxpp sets it to Haswell while it loads the library (the
// first matrix product; not thread-safe against another thread's getenv at that moment) and
// removes it again. A value the user set is always kept; FLAXPP_BLAS names another library.
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

  Blas(Sgemm sgemm, Dgemm dgemm) : sgemm_(sgemm), dgemm_(dgemm) {}

  void gemm(Transpose ta, Transpose tb, int m, int n, int k, const float* a, int lda,
            const float* b, int ldb, float* c, int ldc) const;
  void gemm(Transpose ta, Transpose tb, int m, int n, int k, const double* a, int lda,
            const double* b, int ldb, double* c, int ldc) const;

 private:
  Sgemm sgemm_;  // cblas_sgemm
  Dgemm dgemm_;  // cblas_dgemm
};

// The BLAS, loaded on the first call (thread-safe). Throws DeviceError naming the library
// and FLAXPP_BLAS when it cannot be loaded or lacks cblas_sgemm/cblas_dgemm.
const Blas& blas();

}  // namespace flaxpp::cpu
