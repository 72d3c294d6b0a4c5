// kernels/elementwise_program.hpp — the instructions of program.hpp (an ir::ElementwiseProgram's)
// as the elementwise.hpp functors, for the CPU loops and the CUDA kernel alike: visit_instr
// hands a functor of three operands (the unused ones ignored) to the caller's loop.
#pragma once

#include "flaxpp/kernels/elementwise.hpp"
#include "flaxpp/kernels/hd.hpp"
#include "flaxpp/kernels/program.hpp"

namespace flaxpp::kernels {

// Each functor takes (a, b, c) and applies the lax primitive's functor to the operands the
// instruction has.
template <class Op>
struct Unary3 {
  Op op;
  template <class T>
  FLAXPP_HD T operator()(T a, T /*b*/, T /*c*/) const {
    return op(a);
  }
};
template <class Op>
struct Binary3 {
  template <class T>
  FLAXPP_HD T operator()(T a, T b, T /*c*/) const {
    return Op{}(a, b);
  }
};
// A comparison's bool as 1 or 0 of the operands' type.
template <class Op>
struct CompareAsValue {
  template <class T>
  FLAXPP_HD T operator()(T a, T b, T /*c*/) const {
    return Op{}(a, b) ? T(1) : T(0);
  }
};
struct SelectValue {
  template <class T>
  FLAXPP_HD T operator()(T cond, T on_true, T on_false) const {
    return cond != T(0) ? on_true : on_false;
  }
};

// Calls f(functor) for the instruction's operation; f's result is returned. One case per line
// of elementwise.hpp's lists, so every elementwise primitive is an operation with its functor.
template <class F>
FLAXPP_HD auto visit_instr(ProgramOp op, std::int32_t y, F&& f) {
  switch (op) {
#define FLAXPP_VISIT_BINARY(name, Functor, ...) \
  case ProgramOp::name:                         \
    return f(Binary3<Functor>{});
#define FLAXPP_VISIT_COMPARISON(name, Functor, ...) \
  case ProgramOp::name:                             \
    return f(CompareAsValue<Functor>{});
#define FLAXPP_VISIT_UNARY(name, Functor, ...) \
  case ProgramOp::name:                        \
    return f(Unary3<Functor>{});
    FLAXPP_ELEMENTWISE_BINARY(FLAXPP_VISIT_BINARY)
    FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_VISIT_COMPARISON)
    FLAXPP_ELEMENTWISE_UNARY(FLAXPP_VISIT_UNARY)
#undef FLAXPP_VISIT_BINARY
#undef FLAXPP_VISIT_COMPARISON
#undef FLAXPP_VISIT_UNARY
    case ProgramOp::integer_pow:
      return f(Unary3<IntegerPow>{IntegerPow{y}});
    case ProgramOp::select:
      break;
  }
  return f(SelectValue{});
}

}  // namespace flaxpp::kernels
