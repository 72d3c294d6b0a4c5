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

// The operations as X(name, arity), in the enum's order, with the semantics of the lax
// primitive of the same name (and the same elementwise.hpp functor); the comparisons (lt, le,
// gt, ge, eq, ne) give 1 or 0 in the arrays' dtype; select(c, a, b) is a where c != 0, else b.
// clang-format off
#define FLAXPP_PROGRAM_OPS(X) \
  X(add, 2) X(sub, 2) X(mul, 2) X(div, 2) X(neg, 1) X(sqrt, 1) X(rsqrt, 1) X(integer_pow, 1) \
  X(lt, 2) X(select, 3) X(max, 2) X(min, 2) X(exp, 1) X(log, 1) X(log1p, 1) X(abs, 1) \
  X(le, 2) X(gt, 2) X(ge, 2) X(eq, 2) X(ne, 2)
// clang-format on

#define FLAXPP_PROGRAM_OP_ENUMERATOR(name, arity) name,
enum class ProgramOp : std::uint8_t { FLAXPP_PROGRAM_OPS(FLAXPP_PROGRAM_OP_ENUMERATOR) };
#undef FLAXPP_PROGRAM_OP_ENUMERATOR

// An operation's name, as programs print it, and its number of operands.
inline const char* program_op_name(ProgramOp op) {
#define FLAXPP_PROGRAM_OP_NAME(name, arity) #name,
  static constexpr const char* kNames[] = {FLAXPP_PROGRAM_OPS(FLAXPP_PROGRAM_OP_NAME)};
#undef FLAXPP_PROGRAM_OP_NAME
  return kNames[static_cast<int>(op)];
}
constexpr int program_op_arity(ProgramOp op) {
#define FLAXPP_PROGRAM_OP_ARITY(name, arity) arity,
  constexpr int kArity[] = {FLAXPP_PROGRAM_OPS(FLAXPP_PROGRAM_OP_ARITY)};
#undef FLAXPP_PROGRAM_OP_ARITY
  return kArity[static_cast<int>(op)];
}

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
