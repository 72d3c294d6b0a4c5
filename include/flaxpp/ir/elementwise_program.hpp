// flaxpp/ir/elementwise_program.hpp — a straight-line program of elementwise operations, run
// once per element of many arrays by the fused_elementwise primitive (lax.hpp): what XLA's
// loop fusion does for a chain of elementwise ops, written out explicitly. Each operation
// rounds its result to the arrays' dtype, so a program gives the same bits as the same
// operations applied one primitive at a time. The optimisers build their updates with it
// (optim/transform.hpp), so that a whole update is one pass over each dtype's leaves.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flaxpp/core/aval.hpp"
#include "flaxpp/kernels/program.hpp"

namespace flaxpp::ir {

struct ElementwiseProgram {
  // The operations and instructions of flaxpp/kernels/program.hpp, which the backends' loops and
  // kernels run.
  using Op = kernels::ProgramOp;
  using Instr = kernels::ProgramInstr;
  static constexpr int kMaxRegisters = kernels::kProgramRegisters;
  // How many operands (a, b, c) an operation reads.
  static int arity(Op op);

  // Registers [0, num_scalars) hold the 0-d operands, the next num_inputs the element of each
  // per-array operand, the next constants.size() the constants (in the arrays' dtype), and the
  // rest (up to num_registers) the temporaries the code writes.
  int num_scalars = 0;
  int num_inputs = 0;
  std::vector<double> constants;
  int num_registers = 0;
  std::vector<Instr> code;
  std::vector<std::uint8_t> outputs;  // the registers stored, one per result array
  // Per result: the per-array operand (0..num_inputs-1) whose buffer it takes when that
  // operand is donated, or -1 for any donated operand (XLA's input/output aliasing). Pairing
  // a new value with the old one it replaces keeps each array at one address from call to
  // call, as a replayed CUDA graph needs. Empty: -1 for every result.
  std::vector<std::int8_t> aliases;
  // Per per-array operand: whether it is a bool array (a comparison's mask made elsewhere, as
  // relu's in the forward pass for the backward pass's select), read as 1 or 0 of the
  // arrays' dtype. Empty: none is. A mask never gives its buffer to a result.
  std::vector<bool> masks;
  bool is_mask(int input) const {
    return static_cast<std::size_t>(input) < masks.size() && masks[static_cast<std::size_t>(input)];
  }
  // Per per-array operand: 0 where it is read element by element (an array of the group's
  // shape), else `inner` > 0: it is read as a broadcast, element i of the group reading its
  // element (i / inner) % size (a per-row value along trailing axes, a bias along leading
  // ones, a mask of fewer axes). Empty: every operand is read element by element. Operand 0
  // always is (it gives the group its shape), and a broadcast operand never gives its buffer
  // to a result.
  std::vector<std::int64_t> broadcasts;
  std::int64_t broadcast_inner(int input) const {
    return static_cast<std::size_t>(input) < broadcasts.size()
               ? broadcasts[static_cast<std::size_t>(input)]
               : 0;
  }
  bool is_broadcast(int input) const { return broadcast_inner(input) > 0; }
  // Reductions along the last axes (XLA's row reductions in a fusion): each folds a
  // register's values over every row of the group's `row_axes` trailing axes, by add
  // (reduce_sum) or max (reduce_max), in the order the primitive's own loop folds a row (the
  // same bits). Their results follow the outputs', of the group's shape without those axes.
  // The CPU backend runs them; the jit pass makes them there only.
  struct RowReduction {
    Op op = Op::add;  // add or max
    std::uint8_t reg = 0;
    bool operator==(const RowReduction&) const = default;
  };
  std::vector<RowReduction> row_reductions;
  int row_axes = 0;  // > 0 exactly when there are row reductions
  // The results of one group: the outputs, then the row reductions.
  std::size_t results_per_group() const { return outputs.size() + row_reductions.size(); }
  // The elements the code runs over, in every group of `operands` (a fused_elementwise
  // equation's, scalars first).
  std::int64_t group_elements(std::span<const AVal> operands) const;

  // For each result of one group, the group input whose buffer it takes (or -1 for a new
  // buffer), given which inputs may be given up (`free[j]`: donated and held by nothing else):
  // first the results aliased to a free input take it, then the others take the remaining
  // free ones in order. Safe because every element's inputs are read before its results are
  // written, at the same index.
  std::vector<int> donations(const std::vector<bool>& free) const;

  int first_constant() const { return num_scalars + num_inputs; }
  int first_temporary() const { return first_constant() + static_cast<int>(constants.size()); }
  // "{scalars=0 inputs=2 constants=(0.9); r3=mul(r2, r0); r3=add(r3, r1); -> r3@in1}" for
  // printed graphs (@inN: the result takes input N's buffer when that input is donated;
  // "broadcasts=(1/64)": input 1 is read as a broadcast with inner 64; "rows(1): add(r3)
  // max(r2)": row reductions over the last axis).
  std::string str() const;
  // ValueError unless the registers fit: at most kMaxRegisters of them and of outputs, every
  // register read exists, and the code writes temporaries only; and unless operand 0 is read
  // element by element and no result takes a broadcast operand's buffer; and unless the row
  // reductions add or max existing registers over at least one axis.
  void validate() const;
  bool operator==(const ElementwiseProgram&) const = default;
};

// Builds an ElementwiseProgram from expressions on Values:
//   ElementwiseBuilder b;
//   Value g = b.input(), t = b.input();
//   b.output((1 - decay) * g + decay * t);
//   std::shared_ptr<const ElementwiseProgram> p = b.finish();
// finish() drops what no output uses and assigns registers by liveness; a program needing
// more than kMaxRegisters is a ValueError.
class ElementwiseBuilder;

// A value of an ElementwiseBuilder's program (an operand, constant or operation result).
class ElementwiseValue {
 public:
  ElementwiseValue() = default;
  bool valid() const { return builder_ != nullptr; }
  ElementwiseBuilder& builder() const;
  int id() const { return id_; }

 private:
  friend class ElementwiseBuilder;
  ElementwiseValue(ElementwiseBuilder* b, int id) : builder_(b), id_(id) {}
  ElementwiseBuilder* builder_ = nullptr;
  int id_ = -1;
};

class ElementwiseBuilder {
 public:
  using Value = ElementwiseValue;

  ElementwiseBuilder() = default;
  ElementwiseBuilder(const ElementwiseBuilder&) = delete;
  ElementwiseBuilder& operator=(const ElementwiseBuilder&) = delete;

  // The next 0-d operand (the same value for every element).
  Value scalar();
  // The element of the next per-array operand.
  Value input();
  // The element of the next per-array operand, a bool array read as 1 or 0
  // (ElementwiseProgram::masks).
  Value mask_input();
  // The next per-array operand read as a broadcast (ElementwiseProgram::broadcasts): element i
  // reads its element (i / inner) % size; a bool one as 1 or 0 where `mask`. Not the first
  // per-array operand.
  Value broadcast_input(std::int64_t inner, bool mask = false);
  Value constant(double value);
  Value apply(ElementwiseProgram::Op op, Value a, Value b = {}, Value c = {}, std::int32_t y = 0);
  // Adds a result; returns its index among the outputs. With `in_place_of` (an input()),
  // the result takes that operand's buffer when the operand is donated.
  int output(Value v, Value in_place_of = {});
  // Adds a row reduction (ElementwiseProgram::row_reductions) of `v` by `op` (add or max) over
  // the group's `row_axes` trailing axes, the same for every one of a program; returns its
  // index among them.
  int reduce_rows(ElementwiseProgram::Op op, Value v, int row_axes);

  int num_scalars() const { return num_scalars_; }
  int num_inputs() const { return num_inputs_; }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  std::shared_ptr<const ElementwiseProgram> finish() const;

 private:
  enum class Kind : std::uint8_t { scalar, input, constant, op };
  struct Node {
    Kind kind;
    int index = 0;  // the scalar's, input's or constant's number
    ElementwiseProgram::Op op = ElementwiseProgram::Op::add;
    int a = -1, b = -1, c = -1;
    std::int32_t y = 0;
  };
  Value add_node(Node n);
  int check(Value v) const;

  std::vector<Node> nodes_;
  std::vector<double> constants_;
  std::vector<int> outputs_;              // node ids
  std::vector<std::pair<ElementwiseProgram::Op, int>> row_reductions_;  // (op, node id)
  int row_axes_ = 0;
  std::vector<std::int8_t> aliases_;      // per output: an input's number, or -1
  std::vector<bool> masks_;               // per input
  std::vector<std::int64_t> broadcasts_;  // per input
  int num_scalars_ = 0, num_inputs_ = 0;
};

using EValue = ElementwiseValue;
EValue operator+(EValue a, EValue b);
EValue operator-(EValue a, EValue b);
EValue operator*(EValue a, EValue b);
EValue operator/(EValue a, EValue b);
EValue operator-(EValue a);
// A double operand is a constant of the arrays' dtype (a weak-typed scalar, as in JAX).
EValue operator+(EValue a, double b);
EValue operator+(double a, EValue b);
EValue operator-(EValue a, double b);
EValue operator-(double a, EValue b);
EValue operator*(EValue a, double b);
EValue operator*(double a, EValue b);
EValue operator/(EValue a, double b);
EValue operator/(double a, EValue b);
// One function per elementwise primitive (flaxpp/kernels/elementwise.hpp's lists), with its
// semantics: add(a, b), max(a, b), pow(a, b), exp(x), tanh(x), sign(x), ...; the comparisons
// (lt(a, b), eq(a, b), ...) give 1 or 0 in the arrays' dtype.
#define FLAXPP_EVALUE_BINARY(name, ...) EValue name(EValue a, EValue b);
#define FLAXPP_EVALUE_UNARY(name, ...) EValue name(EValue x);
FLAXPP_ELEMENTWISE_BINARY(FLAXPP_EVALUE_BINARY)
FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_EVALUE_BINARY)
FLAXPP_ELEMENTWISE_UNARY(FLAXPP_EVALUE_UNARY)
#undef FLAXPP_EVALUE_BINARY
#undef FLAXPP_EVALUE_UNARY
EValue integer_pow(EValue x, std::int32_t y);
// cond != 0 ? on_true : on_false (lax.select's argument order).
EValue select(EValue cond, EValue on_true, EValue on_false);

class Primitive;
// The program operation of an elementwise primitive: every line of
// flaxpp/kernels/elementwise.hpp's lists, and integer_pow; none for any other primitive.
std::optional<ElementwiseProgram::Op> program_op(const Primitive& p);

}  // namespace flaxpp::ir
