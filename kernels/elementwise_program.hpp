// kernels/elementwise_program.hpp — the instructions of an ir::ElementwiseProgram as the
// elementwise.hpp functors, for the CPU loops and the CUDA kernel alike: visit_instr hands a
// functor of three operands (the unused ones ignored) to the caller's loop.
#pragma once

#include "elementwise.hpp"
#include "flaxpp/ir/elementwise_program.hpp"
#include "hd.hpp"

namespace flaxpp::kernels {

using ProgramOp = ir::ElementwiseProgram::Op;

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
struct LtAsValue {
  template <class T>
  FLAXPP_HD T operator()(T a, T b, T /*c*/) const {
    return Lt{}(a, b) ? T(1) : T(0);
  }
};
struct SelectValue {
  template <class T>
  FLAXPP_HD T operator()(T cond, T on_true, T on_false) const {
    return cond != T(0) ? on_true : on_false;
  }
};

// Calls f(functor) for the instruction's operation; f's result is returned.
template <class F>
FLAXPP_HD auto visit_instr(ProgramOp op, std::int32_t y, F&& f) {
  switch (op) {
    case ProgramOp::add:
      return f(Binary3<Add>{});
    case ProgramOp::sub:
      return f(Binary3<Sub>{});
    case ProgramOp::mul:
      return f(Binary3<Mul>{});
    case ProgramOp::div:
      return f(Binary3<Div>{});
    case ProgramOp::neg:
      return f(Unary3<Neg>{});
    case ProgramOp::sqrt:
      return f(Unary3<Sqrt>{});
    case ProgramOp::rsqrt:
      return f(Unary3<Rsqrt>{});
    case ProgramOp::integer_pow:
      return f(Unary3<IntegerPow>{IntegerPow{y}});
    case ProgramOp::lt:
      return f(LtAsValue{});
    case ProgramOp::select:
      break;
  }
  return f(SelectValue{});
}

}  // namespace flaxpp::kernels
