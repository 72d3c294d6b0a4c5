// kernels/program.hpp — the instruction set of fused elementwise programs, as plain data:
// ir::ElementwiseProgram (flaxpp/ir/elementwise_program.hpp) is made of these instructions,
// and the CPU loops and the CUDA kernel (elementwise_program.hpp, fused_elementwise_kernel.cuh)
// run them. No framework header: the public headers include it as
// <flaxpp/kernels/program.hpp>, where the install puts kernels/ (the build tree has a copy
// there), hence the include guard rather than #pragma once.
#ifndef FLAXPP_KERNELS_PROGRAM_HPP
#define FLAXPP_KERNELS_PROGRAM_HPP

#include <cstdint>

namespace flaxpp::kernels {

// The operations, with the semantics of the lax primitive of the same name (and the same
// elementwise.hpp functor); the comparisons (lt, le, gt, ge, eq, ne) give 1 or 0 in the
// arrays' dtype; select(c, a, b) is a where c != 0, else b.
enum class ProgramOp : std::uint8_t {
  add, sub, mul, div, neg, sqrt, rsqrt, integer_pow, lt, select,
  max, min, exp, log, log1p, abs, le, gt, ge, eq, ne
};

struct ProgramInstr {
  ProgramOp op = ProgramOp::add;
  std::uint8_t dst = 0, a = 0, b = 0, c = 0;  // registers
  std::int32_t y = 0;                         // integer_pow's exponent
  bool operator==(const ProgramInstr&) const = default;
};

// Registers of a running element (operands, constants, temporaries): backends keep them all in
// registers or local memory.
inline constexpr int kProgramRegisters = 32;

}  // namespace flaxpp::kernels

#endif  // FLAXPP_KERNELS_PROGRAM_HPP
