// kernels/elementwise_program.hpp — the instructions of program.hpp (an ir::ElementwiseProgram's)
// as the elementwise.hpp functors, for the CPU loops and the CUDA kernel alike: visit_instr
// hands a functor of three operands (the unused ones ignored) to the caller's loop.
#pragma once

#include "elementwise.hpp"
#include "hd.hpp"
#include "program.hpp"

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
      return f(CompareAsValue<Lt>{});
    case ProgramOp::le:
      return f(CompareAsValue<Le>{});
    case ProgramOp::gt:
      return f(CompareAsValue<Gt>{});
    case ProgramOp::ge:
      return f(CompareAsValue<Ge>{});
    case ProgramOp::eq:
      return f(CompareAsValue<Eq>{});
    case ProgramOp::ne:
      return f(CompareAsValue<Ne>{});
    case ProgramOp::max:
      return f(Binary3<Max>{});
    case ProgramOp::min:
      return f(Binary3<Min>{});
    case ProgramOp::exp:
      return f(Unary3<Exp>{});
    case ProgramOp::log:
      return f(Unary3<Log>{});
    case ProgramOp::log1p:
      return f(Unary3<Log1p>{});
    case ProgramOp::abs:
      return f(Unary3<Abs>{});
    case ProgramOp::select:
      break;
  }
  return f(SelectValue{});
}

}  // namespace flaxpp::kernels
