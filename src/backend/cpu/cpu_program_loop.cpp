// run_program_instr (cpu_program_loop.hpp): the instruction's functor in a plain loop the
// compiler vectorises, flattened into each clone (every call inlined) so that it is compiled
// for the clone's instruction set.
#include "backend/cpu/cpu_program_loop.hpp"

#include "backend/cpu/cpu_clones.hpp"
#include "backend/cpu/cpu_unary_loop.hpp"
#include "kernels/elementwise_program.hpp"

namespace flaxpp::cpu {
namespace {

template <class T>
void run_instr(kernels::ProgramOp op, std::int32_t y, const T* a, const T* b, const T* c, T* d,
               std::int64_t m) {
  kernels::visit_instr(op, y, [&](auto f) {
    if constexpr (requires { f.op; }) {  // kernels::Unary3: the primitive's loop
      unary_loop(f.op, a, d, m);
    } else {
      for (std::int64_t i = 0; i < m; ++i)
        d[i] = f(a[i], b[i], c[i]);
    }
  });
}

}  // namespace

FLAXPP_CPU_CLONES [[gnu::flatten]] void run_program_instr(kernels::ProgramOp op, std::int32_t y,
                                                          const float* a, const float* b,
                                                          const float* c, float* d,
                                                          std::int64_t m) {
  run_instr(op, y, a, b, c, d, m);
}

FLAXPP_CPU_CLONES [[gnu::flatten]] void run_program_instr(kernels::ProgramOp op, std::int32_t y,
                                                          const double* a, const double* b,
                                                          const double* c, double* d,
                                                          std::int64_t m) {
  run_instr(op, y, a, b, c, d, m);
}

}  // namespace flaxpp::cpu
