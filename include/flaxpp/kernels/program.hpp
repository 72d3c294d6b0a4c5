// flaxpp/kernels/program.hpp — the instruction set of fused elementwise programs, as plain data:
// ir::ElementwiseProgram (flaxpp/ir/elementwise_program.hpp) is made of these instructions,
// and the CPU loops and the CUDA kernel (kernels/elementwise_program.hpp,
// fused_elementwise_kernel.cuh) run them. No framework header: like the other headers of
// flaxpp/kernels/, it is shared by the public headers, the library's C++ and its CUDA kernels.
#ifndef FLAXPP_KERNELS_PROGRAM_HPP
#define FLAXPP_KERNELS_PROGRAM_HPP

#include <cstdint>

#include "elementwise.hpp"

namespace flaxpp::kernels {

// The operations: every elementwise primitive of elementwise.hpp's lists, with the semantics
// (and the functor) of the lax primitive of the same name, then integer_pow (its exponent in
// the instruction) and select(c, a, b), which is a where c != 0, else b. The comparisons give
// 1 or 0 in the arrays' dtype.
#define FLAXPP_PROGRAM_OP_ENUMERATOR(name, ...) name,
enum class ProgramOp : std::uint8_t {
  FLAXPP_ELEMENTWISE_BINARY(FLAXPP_PROGRAM_OP_ENUMERATOR)
  FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_PROGRAM_OP_ENUMERATOR)
  FLAXPP_ELEMENTWISE_UNARY(FLAXPP_PROGRAM_OP_ENUMERATOR)
  integer_pow,
  select
};
#undef FLAXPP_PROGRAM_OP_ENUMERATOR

// An operation's name (as programs print it), its number of operands, whether it is a
// comparison or transcendental, and why jit's fusion pass may not put its primitive into a
// program ("" where it may): each a table generated from the lists, in the enum's order.
inline const char* program_op_name(ProgramOp op) {
#define FLAXPP_PROGRAM_OP_NAME(name, ...) #name,
  static constexpr const char* kNames[] = {
      FLAXPP_ELEMENTWISE_BINARY(FLAXPP_PROGRAM_OP_NAME) FLAXPP_ELEMENTWISE_COMPARISONS(
          FLAXPP_PROGRAM_OP_NAME) FLAXPP_ELEMENTWISE_UNARY(FLAXPP_PROGRAM_OP_NAME) "integer_pow",
      "select"};
#undef FLAXPP_PROGRAM_OP_NAME
  return kNames[static_cast<int>(op)];
}
constexpr int program_op_arity(ProgramOp op) {
#define FLAXPP_PROGRAM_OP_ONE(name, ...) 1,
#define FLAXPP_PROGRAM_OP_TWO(name, ...) 2,
  constexpr int kArity[] = {FLAXPP_ELEMENTWISE_BINARY(FLAXPP_PROGRAM_OP_TWO)
                                FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_PROGRAM_OP_TWO)
                                    FLAXPP_ELEMENTWISE_UNARY(FLAXPP_PROGRAM_OP_ONE) 1,
                            3};
#undef FLAXPP_PROGRAM_OP_ONE
#undef FLAXPP_PROGRAM_OP_TWO
  return kArity[static_cast<int>(op)];
}
constexpr bool program_op_is_comparison(ProgramOp op) {
#define FLAXPP_PROGRAM_OP_NO(name, ...) false,
#define FLAXPP_PROGRAM_OP_YES(name, ...) true,
  constexpr bool kComparison[] = {FLAXPP_ELEMENTWISE_BINARY(FLAXPP_PROGRAM_OP_NO)
                                      FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_PROGRAM_OP_YES)
                                          FLAXPP_ELEMENTWISE_UNARY(FLAXPP_PROGRAM_OP_NO) false,
                                  false};
#undef FLAXPP_PROGRAM_OP_NO
#undef FLAXPP_PROGRAM_OP_YES
  return kComparison[static_cast<int>(op)];
}
// Whether an operation is transcendental as XLA's cost analysis counts them (exp, log, log1p,
// tanh, logistic, sqrt, rsqrt, erf, sin, cos, pow: HloCostAnalysis's `transcendentals`): the
// lines whose dtypes are floating only (Fp).
constexpr bool program_op_is_transcendental(ProgramOp op) {
#define FLAXPP_PROGRAM_OP_FP(name, Functor, dtypes, unfused) FLAXPP_PROGRAM_OP_IS_##dtypes,
#define FLAXPP_PROGRAM_OP_NO(name, ...) false,
#define FLAXPP_PROGRAM_OP_IS_Fp true
#define FLAXPP_PROGRAM_OP_IS_Num false
  constexpr bool kTranscendental[] = {FLAXPP_ELEMENTWISE_BINARY(FLAXPP_PROGRAM_OP_FP)
                                          FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_PROGRAM_OP_NO)
                                              FLAXPP_ELEMENTWISE_UNARY(FLAXPP_PROGRAM_OP_FP) false,
                                      false};
#undef FLAXPP_PROGRAM_OP_FP
#undef FLAXPP_PROGRAM_OP_NO
#undef FLAXPP_PROGRAM_OP_IS_Fp
#undef FLAXPP_PROGRAM_OP_IS_Num
  return kTranscendental[static_cast<int>(op)];
}
constexpr const char* program_op_unfused_reason(ProgramOp op) {
#define FLAXPP_PROGRAM_OP_REASON(name, Functor, dtypes, unfused) unfused,
#define FLAXPP_PROGRAM_OP_COMPARISON_REASON(name, Functor, unfused) unfused,
  constexpr const char* kReason[] = {
      FLAXPP_ELEMENTWISE_BINARY(FLAXPP_PROGRAM_OP_REASON)
          FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_PROGRAM_OP_COMPARISON_REASON)
              FLAXPP_ELEMENTWISE_UNARY(FLAXPP_PROGRAM_OP_REASON) "",
      ""};
#undef FLAXPP_PROGRAM_OP_REASON
#undef FLAXPP_PROGRAM_OP_COMPARISON_REASON
  return kReason[static_cast<int>(op)];
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
