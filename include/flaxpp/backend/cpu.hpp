// The CPU backend's settings: which library computes float32 matrix products and
// convolutions, and how many threads they use.
//
// float32 products run on oneDNN's matmul primitive where flaxpp was built with oneDNN
// (Debian's libdnnl-dev), else on the BLAS that CMake found (OpenBLAS); float64 products
// always run on the BLAS. Under oneDNN, float32 convolutions run on its convolution primitives
// (forward, backward data, backward weights) where the equation is one of those passes and an
// optimised kernel takes it; every other convolution runs as im2col + the products. The
// environment sets the defaults, read at the first product:
//   FLAXPP_CPU_GEMM=onednn|blas   the float32 engine (default: onednn where built with it);
//   FLAXPP_NUM_THREADS=N          the threads of every product (default: the libraries' own,
//                                 one per core, or OMP_NUM_THREADS / OPENBLAS_NUM_THREADS).
// The elementwise passes, reductions and copies run on the calling thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace flaxpp::cpu {

enum class GemmEngine { onednn, blas };

// "onednn" or "blas".
std::string_view gemm_engine_name(GemmEngine engine);

// Whether this build of flaxpp has oneDNN.
bool has_onednn();

// The engine float32 products run on now.
GemmEngine gemm_engine();

// Sets it for every later product in the process. Throws ValueError for onednn in a build
// without oneDNN.
void set_gemm_engine(GemmEngine engine);

// Restores the engine the process had when the guard was made, when it goes out of scope (also
// when what ran meanwhile threw): for code that switches engines to compare them.
class GemmEngineGuard {
 public:
  GemmEngineGuard() : engine_(gemm_engine()) {}
  ~GemmEngineGuard() { set_gemm_engine(engine_); }
  GemmEngineGuard(const GemmEngineGuard&) = delete;
  GemmEngineGuard& operator=(const GemmEngineGuard&) = delete;

 private:
  GemmEngine engine_;
};

// The threads products and the CPU's own kernels (fused elementwise programs, reductions along
// the last axes, the fused attention) are asked to use (0: the libraries' defaults, one per
// core). The CPU's own kernels share out whole chunks or rows, so their results do not depend
// on it; they run on oneDNN's OpenMP threads, and on the calling thread alone in a build without
// oneDNN.
int num_threads();

// Sets them for every later product and kernel loop (0 restores the defaults). Throws ValueError
// for a negative count.
void set_num_threads(int threads);

// How many convolutions ran on oneDNN's convolution primitives in this process so far (0 in a
// build without oneDNN).
std::int64_t onednn_convolutions();
// How many float32 products oneDNN has run reading an operand in place with its strides, where
// dot_general's layout would otherwise permute it into a copy (an attention's einsums).
std::int64_t onednn_strided_products();

// How many of the CPU's own kernel loops ran shared among more than one thread in this process
// so far (0 in a build without oneDNN, or with one thread).
std::int64_t shared_loops();

}  // namespace flaxpp::cpu
