// ElementwiseBuilder: expressions on Values, then dead-code removal and register assignment
// by liveness; ElementwiseProgram's printed form.
#include "flaxpp/ir/elementwise_program.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/lax.hpp"

namespace flaxpp::ir {

using Op = ElementwiseProgram::Op;

std::optional<Op> program_op(const Primitive& p) {
  static const std::map<const Primitive*, Op> ops = {
#define FLAXPP_PROGRAM_OP_OF(name, ...) {&lax::name##_p, Op::name},
      FLAXPP_ELEMENTWISE_BINARY(FLAXPP_PROGRAM_OP_OF)
          FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_PROGRAM_OP_OF)
              FLAXPP_ELEMENTWISE_UNARY(FLAXPP_PROGRAM_OP_OF)
#undef FLAXPP_PROGRAM_OP_OF
                  {&lax::integer_pow_p, Op::integer_pow}};
  const auto it = ops.find(&p);
  if (it == ops.end()) return std::nullopt;
  return it->second;
}

int ElementwiseProgram::arity(Op op) {
  return kernels::program_op_arity(op);
}

std::vector<int> ElementwiseProgram::donations(const std::vector<bool>& free) const {
  std::vector<int> from(outputs.size(), -1);
  std::vector<bool> taken(free.size(), false);
  const auto available = [&](std::size_t j) {
    return !taken[j] && free[j] && !is_mask(static_cast<int>(j)) &&
           !is_broadcast(static_cast<int>(j));
  };
  for (std::size_t k = 0; k < aliases.size() && k < from.size(); ++k)
    if (const int j = aliases[k]; j >= 0 && available(static_cast<std::size_t>(j))) {
      from[k] = j;
      taken[static_cast<std::size_t>(j)] = true;
    }
  std::size_t next = 0;
  for (std::size_t k = 0; k < from.size(); ++k) {
    if (from[k] >= 0) continue;
    while (next < free.size() && !available(next))
      ++next;
    if (next == free.size()) break;
    from[k] = static_cast<int>(next);
    taken[next++] = true;
  }
  return from;
}

std::int64_t ElementwiseProgram::group_elements(std::span<const AVal> operands) const {
  std::int64_t total = 0;
  if (num_inputs == 0) return total;
  for (auto g = static_cast<std::size_t>(num_scalars); g < operands.size();
       g += static_cast<std::size_t>(num_inputs))
    total += operands[g].shape.size();
  return total;
}

std::string ElementwiseProgram::str() const {
  std::string out = detail::str("{scalars=", num_scalars, " inputs=", num_inputs);
  if (!masks.empty()) {
    out += " masks=(";
    bool first = true;
    for (int i = 0; i < num_inputs; ++i)
      if (is_mask(i)) {
        out += detail::str(first ? "" : ", ", i);
        first = false;
      }
    out += ")";
  }
  if (!broadcasts.empty()) {
    out += " broadcasts=(";
    bool first = true;
    for (int i = 0; i < num_inputs; ++i)
      if (is_broadcast(i)) {
        out += detail::str(first ? "" : ", ", i, "/", broadcast_inner(i));
        first = false;
      }
    out += ")";
  }
  out += " constants=(";
  for (std::size_t i = 0; i < constants.size(); ++i)
    out += detail::str(i ? ", " : "", constants[i]);
  out += ")";
  for (const Instr& in : code) {
    out += detail::str("; r", int(in.dst), "=", kernels::program_op_name(in.op), "(r", int(in.a));
    if (ElementwiseProgram::arity(in.op) > 1) out += detail::str(", r", int(in.b));
    if (ElementwiseProgram::arity(in.op) > 2) out += detail::str(", r", int(in.c));
    if (in.op == Op::integer_pow) out += detail::str(", y=", in.y);
    out += ")";
  }
  out += "; ->";
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    out += detail::str(" r", int(outputs[k]));
    if (k < aliases.size() && aliases[k] >= 0) out += detail::str("@in", int(aliases[k]));
  }
  if (!row_reductions.empty()) {
    out += detail::str("; rows(", row_axes, "):");
    for (const RowReduction& r : row_reductions)
      out += detail::str(" ", kernels::program_op_name(r.op), "(r", int(r.reg), ")");
  }
  return out + "}";
}

void ElementwiseProgram::validate() const {
  auto fail = [this](const std::string& what) {
    throw ValueError(detail::str("invalid elementwise program ", str(), ": ", what));
  };
  if (num_scalars < 0 || num_inputs < 0) fail("negative operand counts");
  if (num_registers > kMaxRegisters || first_temporary() > num_registers)
    fail(detail::str("it needs ", std::max(num_registers, first_temporary()),
                     " registers; a program has at most ", kMaxRegisters));
  if (outputs.size() > static_cast<std::size_t>(kMaxRegisters))
    fail(detail::str(outputs.size(), " outputs; a program has at most ", kMaxRegisters));
  for (const std::uint8_t r : outputs)
    if (r >= num_registers) fail(detail::str("output register r", int(r), " does not exist"));
  if (!masks.empty() && masks.size() != static_cast<std::size_t>(num_inputs))
    fail(detail::str(masks.size(), " mask flags for ", num_inputs, " inputs"));
  if (!broadcasts.empty() && broadcasts.size() != static_cast<std::size_t>(num_inputs))
    fail(detail::str(broadcasts.size(), " broadcast flags for ", num_inputs, " inputs"));
  if (is_broadcast(0)) fail("operand 0 is read as a broadcast; it must give the group its shape");
  for (std::size_t i = 0; i < broadcasts.size(); ++i)
    if (broadcasts[i] < 0) fail(detail::str("operand ", i, " has broadcast inner ", broadcasts[i]));
  for (std::size_t k = 0; k < aliases.size(); ++k)
    if (is_mask(aliases[k]) || is_broadcast(aliases[k]))
      fail(detail::str("output ", k, " aliases ", is_mask(aliases[k]) ? "mask" : "broadcast",
                       " operand ", int(aliases[k])));
  if (!aliases.empty() && aliases.size() != outputs.size())
    fail(detail::str(aliases.size(), " aliases for ", outputs.size(), " outputs"));
  for (std::size_t k = 0; k < aliases.size(); ++k) {
    if (aliases[k] < -1 || aliases[k] >= num_inputs)
      fail(detail::str("output ", k, " aliases operand ", int(aliases[k]), " of ", num_inputs));
    if (aliases[k] >= 0 && std::count(aliases.begin(), aliases.end(), aliases[k]) > 1)
      fail(detail::str("operand ", int(aliases[k]), " is aliased by two outputs"));
  }
  if (results_per_group() > static_cast<std::size_t>(kMaxRegisters))
    fail(detail::str(results_per_group(), " results; a program has at most ", kMaxRegisters));
  if (row_reductions.empty() != (row_axes == 0) || row_axes < 0)
    fail(detail::str(row_reductions.size(), " row reductions over ", row_axes,
                     " trailing axes; row reductions need at least one axis, and axes need them"));
  for (const RowReduction& r : row_reductions) {
    if (r.op != Op::add && r.op != Op::max)
      fail(detail::str("a row reduction by ", kernels::program_op_name(r.op),
                       "; only add and max reduce rows"));
    if (r.reg >= num_registers)
      fail(detail::str("row reduction register r", int(r.reg), " does not exist"));
  }
  for (const Instr& in : code) {
    if (in.dst < first_temporary() || in.dst >= num_registers)
      fail(detail::str("r", int(in.dst), " is written, but only temporaries r", first_temporary(),
                       "..r", num_registers - 1, " may be"));
    for (const std::uint8_t r : {in.a, in.b, in.c})
      if (r >= num_registers) fail(detail::str("register r", int(r), " does not exist"));
  }
}

ElementwiseBuilder& ElementwiseValue::builder() const {
  FLAXPP_ASSERT(builder_ != nullptr, "an ElementwiseBuilder::Value used before it was assigned");
  return *builder_;
}

ElementwiseBuilder::Value ElementwiseBuilder::add_node(Node n) {
  nodes_.push_back(n);
  return Value(this, static_cast<int>(nodes_.size()) - 1);
}

int ElementwiseBuilder::check(Value v) const {
  if (v.builder_ != this)
    throw ValueError(
        v.builder_ == nullptr
            ? "an elementwise program value used before it was assigned"
            : "an elementwise program value from another program (in an optimiser: a value "
              "taken before UpdateBuilder::global_norm, which runs the code before it)");
  return v.id_;
}

ElementwiseBuilder::Value ElementwiseBuilder::scalar() {
  return add_node({.kind = Kind::scalar, .index = num_scalars_++});
}

ElementwiseBuilder::Value ElementwiseBuilder::input() {
  masks_.push_back(false);
  broadcasts_.push_back(0);
  return add_node({.kind = Kind::input, .index = num_inputs_++});
}

ElementwiseBuilder::Value ElementwiseBuilder::mask_input() {
  masks_.push_back(true);
  broadcasts_.push_back(0);
  return add_node({.kind = Kind::input, .index = num_inputs_++});
}

ElementwiseBuilder::Value ElementwiseBuilder::broadcast_input(std::int64_t inner, bool mask) {
  if (inner <= 0 || num_inputs_ == 0)
    throw ValueError(
        detail::str("a broadcast operand of an elementwise program needs an inner "
                    "size > 0 (got ",
                    inner, ") and an element-by-element operand before it"));
  masks_.push_back(mask);
  broadcasts_.push_back(inner);
  return add_node({.kind = Kind::input, .index = num_inputs_++});
}

ElementwiseBuilder::Value ElementwiseBuilder::constant(double value) {
  // One register per distinct constant (compared bitwise, so -0.0 and 0.0 stay apart).
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.kind == Kind::constant &&
        std::memcmp(&constants_[static_cast<std::size_t>(n.index)], &value, sizeof value) == 0)
      return Value(this, static_cast<int>(i));
  }
  constants_.push_back(value);
  return add_node({.kind = Kind::constant, .index = static_cast<int>(constants_.size()) - 1});
}

ElementwiseBuilder::Value ElementwiseBuilder::apply(Op op, Value a, Value b, Value c,
                                                    std::int32_t y) {
  const int n = ElementwiseProgram::arity(op);
  return add_node({.kind = Kind::op,
                   .op = op,
                   .a = check(a),
                   .b = n > 1 ? check(b) : -1,
                   .c = n > 2 ? check(c) : -1,
                   .y = y});
}

int ElementwiseBuilder::output(Value v, Value in_place_of) {
  std::int8_t alias = -1;
  if (in_place_of.valid()) {
    const Node& n = nodes_[static_cast<std::size_t>(check(in_place_of))];
    if (n.kind != Kind::input || masks_[static_cast<std::size_t>(n.index)] ||
        broadcasts_[static_cast<std::size_t>(n.index)] > 0)
      throw ValueError("an elementwise program result can replace an input() only");
    alias = static_cast<std::int8_t>(n.index);
    if (std::find(aliases_.begin(), aliases_.end(), alias) != aliases_.end())
      throw ValueError(detail::str("two results of an elementwise program replace input ",
                                   int(alias), "; name it as in_place_of for one of them only"));
  }
  outputs_.push_back(check(v));
  aliases_.push_back(alias);
  return static_cast<int>(outputs_.size()) - 1;
}

int ElementwiseBuilder::reduce_rows(Op op, Value v, int row_axes) {
  if ((op != Op::add && op != Op::max) || row_axes <= 0 ||
      (row_axes_ != 0 && row_axes != row_axes_))
    throw ValueError(detail::str(
        "a row reduction of an elementwise program adds or takes the maximum over the same "
        "trailing axes (at least one) as its others; got ",
        kernels::program_op_name(op), " over ", row_axes, " axes",
        row_axes_ != 0 ? detail::str(" after ", row_axes_) : std::string()));
  row_axes_ = row_axes;
  row_reductions_.emplace_back(op, check(v));
  return static_cast<int>(row_reductions_.size()) - 1;
}

std::shared_ptr<const ElementwiseProgram> ElementwiseBuilder::finish() const {
  const int count = static_cast<int>(nodes_.size());
  // The last instruction reading each node (outputs are read after every instruction).
  constexpr int kForever = std::numeric_limits<int>::max();
  std::vector<int> last_use(static_cast<std::size_t>(count), -1);
  std::vector<bool> live(static_cast<std::size_t>(count), false);
  // Results (outputs and row reductions) are read after every instruction.
  std::vector<int> results = outputs_;
  for (const auto& [op, node] : row_reductions_)
    results.push_back(node);
  for (const int o : results) {
    live[static_cast<std::size_t>(o)] = true;
    last_use[static_cast<std::size_t>(o)] = kForever;
  }
  for (int i = count - 1; i >= 0; --i) {
    const Node& n = nodes_[static_cast<std::size_t>(i)];
    if (!live[static_cast<std::size_t>(i)] || n.kind != Kind::op) continue;
    for (const int operand : {n.a, n.b, n.c}) {
      if (operand < 0) continue;
      live[static_cast<std::size_t>(operand)] = true;
      int& last = last_use[static_cast<std::size_t>(operand)];
      last = std::max(last, i);
    }
  }

  auto program = std::make_shared<ElementwiseProgram>();
  program->num_scalars = num_scalars_;
  program->num_inputs = num_inputs_;
  std::vector<int> reg(static_cast<std::size_t>(count), -1);
  // Operands keep their fixed registers; constants that some output needs get the next ones.
  for (int i = 0; i < count; ++i) {
    const Node& n = nodes_[static_cast<std::size_t>(i)];
    if (n.kind == Kind::scalar) reg[static_cast<std::size_t>(i)] = n.index;
    if (n.kind == Kind::input) reg[static_cast<std::size_t>(i)] = num_scalars_ + n.index;
  }
  for (int i = 0; i < count; ++i) {
    const Node& n = nodes_[static_cast<std::size_t>(i)];
    if (n.kind != Kind::constant || !live[static_cast<std::size_t>(i)]) continue;
    reg[static_cast<std::size_t>(i)] =
        program->first_constant() + static_cast<int>(program->constants.size());
    program->constants.push_back(constants_[static_cast<std::size_t>(n.index)]);
  }
  // Temporaries: a register is free again after the instruction that last reads it (an
  // instruction may write the register it reads: backends read operands before writing).
  std::vector<int> free_regs;
  int next_reg = program->first_temporary();
  for (int i = 0; i < count; ++i) {
    const Node& n = nodes_[static_cast<std::size_t>(i)];
    if (n.kind != Kind::op || !live[static_cast<std::size_t>(i)]) continue;
    for (const int operand : {n.a, n.b, n.c}) {
      if (operand < 0 || last_use[static_cast<std::size_t>(operand)] != i) continue;
      const Node& o = nodes_[static_cast<std::size_t>(operand)];
      const int r = reg[static_cast<std::size_t>(operand)];
      if (o.kind == Kind::op && std::find(free_regs.begin(), free_regs.end(), r) == free_regs.end())
        free_regs.push_back(r);
    }
    int dst = 0;
    if (!free_regs.empty()) {
      const auto lowest = std::min_element(free_regs.begin(), free_regs.end());
      dst = *lowest;
      free_regs.erase(lowest);
    } else {
      dst = next_reg++;
    }
    reg[static_cast<std::size_t>(i)] = dst;
    auto r = [&](int node) {
      return static_cast<std::uint8_t>(node < 0 ? 0 : reg[static_cast<std::size_t>(node)]);
    };
    program->code.push_back({n.op, static_cast<std::uint8_t>(dst), r(n.a), r(n.b), r(n.c), n.y});
  }
  program->num_registers = std::max(next_reg, program->first_temporary());
  if (program->num_registers > ElementwiseProgram::kMaxRegisters)
    throw ValueError(detail::str("an elementwise program needs ", program->num_registers,
                                 " registers, more than the ", ElementwiseProgram::kMaxRegisters,
                                 " a fused kernel has; split it into smaller programs"));
  const auto reg_of = [&](int node) {
    return static_cast<std::uint8_t>(reg[static_cast<std::size_t>(node)]);
  };
  for (const int o : outputs_)
    program->outputs.push_back(reg_of(o));
  for (const auto& [op, node] : row_reductions_)
    program->row_reductions.push_back({op, reg_of(node)});
  program->row_axes = row_axes_;
  if (std::any_of(aliases_.begin(), aliases_.end(), [](std::int8_t a) { return a >= 0; }))
    program->aliases = aliases_;
  if (std::find(masks_.begin(), masks_.end(), true) != masks_.end()) program->masks = masks_;
  if (std::any_of(broadcasts_.begin(), broadcasts_.end(), [](std::int64_t b) { return b > 0; }))
    program->broadcasts = broadcasts_;
  program->validate();
  return program;
}

namespace {
EValue c(EValue like, double v) {
  return like.builder().constant(v);
}
}  // namespace

#define FLAXPP_EVALUE_BINARY(name, ...)       \
  EValue name(EValue a, EValue b) {           \
    return a.builder().apply(Op::name, a, b); \
  }
#define FLAXPP_EVALUE_UNARY(name, ...)     \
  EValue name(EValue x) {                  \
    return x.builder().apply(Op::name, x); \
  }
FLAXPP_ELEMENTWISE_BINARY(FLAXPP_EVALUE_BINARY)
FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_EVALUE_BINARY)
FLAXPP_ELEMENTWISE_UNARY(FLAXPP_EVALUE_UNARY)
#undef FLAXPP_EVALUE_BINARY
#undef FLAXPP_EVALUE_UNARY

EValue operator+(EValue a, EValue b) {
  return add(a, b);
}
EValue operator-(EValue a, EValue b) {
  return sub(a, b);
}
EValue operator*(EValue a, EValue b) {
  return mul(a, b);
}
EValue operator/(EValue a, EValue b) {
  return div(a, b);
}
EValue operator-(EValue a) {
  return neg(a);
}
EValue operator+(EValue a, double b) {
  return a + c(a, b);
}
EValue operator+(double a, EValue b) {
  return c(b, a) + b;
}
EValue operator-(EValue a, double b) {
  return a - c(a, b);
}
EValue operator-(double a, EValue b) {
  return c(b, a) - b;
}
EValue operator*(EValue a, double b) {
  return a * c(a, b);
}
EValue operator*(double a, EValue b) {
  return c(b, a) * b;
}
EValue operator/(EValue a, double b) {
  return a / c(a, b);
}
EValue operator/(double a, EValue b) {
  return c(b, a) / b;
}
EValue integer_pow(EValue x, std::int32_t y) {
  return x.builder().apply(Op::integer_pow, x, {}, {}, y);
}
EValue select(EValue cond, EValue on_true, EValue on_false) {
  return cond.builder().apply(Op::select, cond, on_true, on_false);
}

}  // namespace flaxpp::ir
