// Private to the CPU backend: one instruction of a fused program over a chunk of elements,
// d[i] = op(a[i], b[i], c[i]) for i < m (an operation ignores the operands it does not have),
// compiled for AVX-512, for AVX2 and for any x86-64 (cpu_clones.hpp). Every clone gives the bits
// of the primitive's own loop: the file is compiled without contraction of a multiply and an
// add, each instruction is one functor of flaxpp/kernels/elementwise.hpp, and float32 tanh, exp
// and integer_pow run the primitive's loops (cpu_unary_loop.hpp).
#pragma once

#include <cstdint>

#include "flaxpp/kernels/program.hpp"

namespace flaxpp::cpu {

void run_program_instr(kernels::ProgramOp op, std::int32_t y, const float* a, const float* b,
                       const float* c, float* d, std::int64_t m);
void run_program_instr(kernels::ProgramOp op, std::int32_t y, const double* a, const double* b,
                       const double* c, double* d, std::int64_t m);

}  // namespace flaxpp::cpu
