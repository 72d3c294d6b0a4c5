// The CPU backend's settings: which library computes float32 matrix products, and how many
// threads the products use.
//
// float32 products run on oneDNN's matmul primitive where flaxpp was built with oneDNN
// (Debian's libdnnl-dev), else on the BLAS that CMake found (OpenBLAS); float64 products
// always run on the BLAS. The environment sets the defaults, read at the first product:
//   FLAXPP_CPU_GEMM=onednn|blas   the float32 engine (default: onednn where built with it);
//   FLAXPP_NUM_THREADS=N          the threads of every product (default: the libraries' own,
//                                 one per core, or OMP_NUM_THREADS / OPENBLAS_NUM_THREADS).
// The elementwise passes, reductions and copies run on the calling thread.
#pragma once

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

// The threads products are asked to use (0: the libraries' defaults).
int num_threads();

// Sets them for every later product (0 restores the libraries' defaults). Throws ValueError
// for a negative count.
void set_num_threads(int threads);

}  // namespace flaxpp::cpu
