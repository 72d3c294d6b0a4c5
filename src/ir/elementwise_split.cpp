// split_program: an ElementwiseProgram read as values (which operand, constant or instruction
// each register holds when it is read), cut into instruction ranges that fit the limits, each
// rebuilt by an ElementwiseBuilder (which assigns its registers).
#include "flaxpp/ir/elementwise_split.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "flaxpp/core/error.hpp"

namespace flaxpp::ir {
namespace {

// A value of the program: a 0-d operand, a per-array operand, a constant or an instruction's
// result, by number.
struct Val {
  enum class Kind : std::uint8_t { scalar, input, constant, instr };
  Kind kind;
  int index;
  auto operator<=>(const Val&) const = default;
};

// The program as values: each instruction's operands, and each result's value.
struct Values {
  std::vector<std::array<Val, 3>> operands;  // per instruction, arity() of them used
  std::vector<Val> results;
  std::vector<int> last_read;  // per instruction: the last instruction reading its value, or -1
};

Values values_of(const ElementwiseProgram& p) {
  Values v;
  std::vector<Val> reg(static_cast<std::size_t>(p.num_registers), Val{Val::Kind::scalar, 0});
  for (int r = 0; r < p.first_temporary(); ++r) {
    if (r < p.num_scalars) {
      reg[static_cast<std::size_t>(r)] = {Val::Kind::scalar, r};
    } else if (r < p.first_constant()) {
      reg[static_cast<std::size_t>(r)] = {Val::Kind::input, r - p.num_scalars};
    } else {
      reg[static_cast<std::size_t>(r)] = {Val::Kind::constant, r - p.first_constant()};
    }
  }
  v.last_read.assign(p.code.size(), -1);
  for (std::size_t i = 0; i < p.code.size(); ++i) {
    const ElementwiseProgram::Instr& in = p.code[i];
    std::array<Val, 3> ops{};
    const std::array<std::uint8_t, 3> regs{in.a, in.b, in.c};
    for (int j = 0; j < ElementwiseProgram::arity(in.op); ++j) {
      ops[static_cast<std::size_t>(j)] = reg[regs[static_cast<std::size_t>(j)]];
      if (ops[static_cast<std::size_t>(j)].kind == Val::Kind::instr)
        v.last_read[static_cast<std::size_t>(ops[static_cast<std::size_t>(j)].index)] =
            static_cast<int>(i);
    }
    v.operands.push_back(ops);
    reg[in.dst] = {Val::Kind::instr, static_cast<int>(i)};
  }
  for (const std::uint8_t r : p.outputs)
    v.results.push_back(reg[r]);
  return v;
}

// The 0-d operands instruction i reads.
std::set<int> scalars_read(const ElementwiseProgram& p, const Values& v, std::size_t i) {
  std::set<int> out;
  for (int j = 0; j < ElementwiseProgram::arity(p.code[i].op); ++j)
    if (const Val& x = v.operands[i][static_cast<std::size_t>(j)]; x.kind == Val::Kind::scalar)
      out.insert(x.index);
  return out;
}

// What the stages made so far hold: the made array of each instruction value and of each
// result, and how many arrays there are.
struct Made {
  std::map<int, int> of_instr;
  std::vector<int> results;
  int count = 0;
};

// The stage of instructions [begin, end), or a ValueError when its program does not fit a
// program's registers; `made` is updated only when it succeeds.
ElementwiseStage build_stage(const ElementwiseProgram& p, const Values& v, int begin, int end,
                             Made& made) {
  Made next = made;
  ElementwiseStage stage;
  ElementwiseBuilder b;
  std::map<Val, ElementwiseValue> in_stage;
  // A program with broadcast operands: its operand 0 (read element by element) comes first in
  // every stage too, to give the stage its shape.
  if (!p.broadcasts.empty()) {
    stage.inputs.push_back({false, 0});
    in_stage.emplace(Val{Val::Kind::input, 0}, p.is_mask(0) ? b.mask_input() : b.input());
  }
  auto value_of = [&](const Val& x) -> ElementwiseValue {
    if (auto it = in_stage.find(x); it != in_stage.end()) return it->second;
    ElementwiseValue out;
    switch (x.kind) {
      case Val::Kind::scalar:
        stage.scalars.push_back(x.index);
        out = b.scalar();
        break;
      case Val::Kind::input:
        stage.inputs.push_back({false, x.index});
        out = p.is_broadcast(x.index)
                  ? b.broadcast_input(p.broadcast_inner(x.index), p.is_mask(x.index))
              : p.is_mask(x.index) ? b.mask_input()
                                   : b.input();
        break;
      case Val::Kind::constant:
        out = b.constant(p.constants[static_cast<std::size_t>(x.index)]);
        break;
      case Val::Kind::instr:  // an earlier stage's (this stage's are in in_stage)
        FLAXPP_ASSERT(x.index < begin, "split_program: instruction ", x.index, " read early");
        stage.inputs.push_back({true, next.of_instr.at(x.index)});
        out = b.input();
        break;
    }
    in_stage.emplace(x, out);
    return out;
  };
  for (int i = begin; i < end; ++i) {
    const ElementwiseProgram::Instr& in = p.code[static_cast<std::size_t>(i)];
    std::array<ElementwiseValue, 3> ops{};
    for (int j = 0; j < ElementwiseProgram::arity(in.op); ++j)
      ops[static_cast<std::size_t>(j)] =
          value_of(v.operands[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]);
    in_stage.emplace(Val{Val::Kind::instr, i}, b.apply(in.op, ops[0], ops[1], ops[2], in.y));
  }
  // The program's results this stage computes (the first stage also those that are operands
  // or constants themselves), then values later stages read.
  for (std::size_t k = 0; k < v.results.size(); ++k) {
    const Val& x = v.results[k];
    const bool here = x.kind == Val::Kind::instr ? x.index >= begin && x.index < end : begin == 0;
    if (!here) continue;
    b.output(value_of(x));
    next.results[k] = next.count;
    if (x.kind == Val::Kind::instr) next.of_instr.emplace(x.index, next.count);
    ++next.count;
  }
  for (int i = begin; i < end; ++i) {
    if (v.last_read[static_cast<std::size_t>(i)] < end || next.of_instr.count(i) != 0) continue;
    b.output(in_stage.at(Val{Val::Kind::instr, i}));
    next.of_instr.emplace(i, next.count++);
  }
  // A stage of 0-d operands and constants alone still needs an array to run over.
  if (stage.inputs.empty()) {
    stage.inputs.push_back({false, 0});
    (void)(p.is_mask(0) ? b.mask_input() : b.input());
  }
  stage.program = b.finish();  // a ValueError when the registers do not suffice
  made = std::move(next);
  return stage;
}

}  // namespace

bool fits(const ElementwiseProgram& program, const ElementwiseLimits& limits) {
  return static_cast<int>(program.code.size()) <= limits.max_code &&
         program.num_scalars <= limits.max_scalars;
}

SplitProgram split_program(const ElementwiseProgram& program, const ElementwiseLimits& limits) {
  program.validate();
  const Values v = values_of(program);
  const int n = static_cast<int>(program.code.size());
  SplitProgram split;
  Made made;
  made.results.assign(v.results.size(), -1);
  // Results that are 0-d operands count toward the first stage's 0-d operands.
  std::set<int> result_scalars;
  for (const Val& x : v.results)
    if (x.kind == Val::Kind::scalar) result_scalars.insert(x.index);
  int begin = 0;
  do {
    // As many instructions as the limits allow...
    std::set<int> scalars = begin == 0 ? result_scalars : std::set<int>{};
    int end = begin;
    while (end < n && end - begin < limits.max_code) {
      std::set<int> with = scalars;
      const std::set<int> read = scalars_read(program, v, static_cast<std::size_t>(end));
      with.insert(read.begin(), read.end());
      if (static_cast<int>(with.size()) > limits.max_scalars) break;
      scalars = std::move(with);
      ++end;
    }
    if (end == begin && n > 0)
      throw ValueError(detail::str("split_program: instruction ", begin, " of ", program.str(),
                                   " needs more than ", limits.max_scalars,
                                   " 0-d operands, or a stage holds no instruction (max_code ",
                                   limits.max_code, ")"));
    // ...and fewer while the registers do not suffice.
    for (;;) {
      try {
        split.stages.push_back(build_stage(program, v, begin, end, made));
        break;
      } catch (const ValueError&) {
        if (end - begin <= 1) throw;
        --end;
      }
    }
    begin = end;
  } while (begin < n);
  split.results = std::move(made.results);
  return split;
}

}  // namespace flaxpp::ir
