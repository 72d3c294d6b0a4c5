// ir::split_program and backend_impl::run_in_stages: a program over a backend's limits runs as
// stages within them and gives the unsplit program's bits. On the CPU (no limits) the stages
// are run explicitly; the CUDA rerun of this suite also sends the long program through the
// CUDA backend, which splits it itself (its launches take 256 instructions, 16 0-d operands).
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/ir/elementwise_split.hpp"
#include "flaxpp/ir/lax.hpp"
#include "src/backend/fused_stages.hpp"

using namespace flaxpp;
using ir::ElementwiseBuilder;
using ir::EValue;

namespace {

constexpr int kScalars = 17;  // over a CUDA launch's 16

// A long program: `steps` rounds over three inputs and kScalars 0-d operands, every kind of
// instruction, values kept bounded (each round mixes with factors below 1). Its results: the
// final value, an early intermediate, an input itself, a 0-d operand itself, a constant, and
// the final value again.
std::shared_ptr<const ir::ElementwiseProgram> long_program(int steps) {
  ElementwiseBuilder b;
  std::vector<EValue> s;
  for (int k = 0; k < kScalars; ++k)
    s.push_back(b.scalar());
  const EValue x = b.input(), y = b.input(), z = b.input();
  EValue v = x, w = y, early;
  for (int i = 0; i < steps; ++i) {
    const EValue sk = s[static_cast<std::size_t>(i % kScalars)];
    switch (i % 6) {
      case 0:
        v = v * sk + w * 0.25;
        break;
      case 1:
        w = ir::sqrt(w * w + 1.0) - z * sk;
        break;
      case 2:
        v = ir::select(ir::lt(v, w), v - sk, ir::rsqrt(ir::integer_pow(v, 2) + 0.5));
        break;
      case 3:
        w = -(w / (sk + 1.0)) + v * 0.5;
        break;
      case 4:
        v = (v + w) * 0.5 - sk * 0.25;
        break;
      default:
        w = ir::select(s[static_cast<std::size_t>((i + 1) % kScalars)], w, v) * 0.5;
        break;
    }
    if (i == steps / 3) early = v + w;
  }
  b.output(v + w);
  b.output(early);
  b.output(z);
  b.output(s[3]);
  b.output(b.constant(0.25));
  b.output(v + w);
  return b.finish();
}

template <class T>
Array values(const Shape& shape, double base) {
  std::vector<T> v(static_cast<std::size_t>(shape.size()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<T>(base + 0.37 * static_cast<double>(i % 11) - 0.05 * double(i % 7));
  return Array::from_vector(v, shape);
}

// The 0-d operands then three inputs per group, for groups of these shapes.
template <class T>
std::vector<Array> operands(const std::vector<Shape>& shapes) {
  std::vector<Array> in;
  for (int k = 0; k < kScalars; ++k)
    in.push_back(Array::from_vector(std::vector<T>{static_cast<T>(0.3 + 0.03 * k)}, Shape{}));
  for (const Shape& shape : shapes) {
    in.push_back(values<T>(shape, -0.5));
    in.push_back(values<T>(shape, 0.75));
    in.push_back(values<T>(shape, 0.1));
  }
  return in;
}

template <class T>
void check_same_bits(const std::vector<Array>& a, const std::vector<Array>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    REQUIRE(a[i].shape() == b[i].shape());
    const std::vector<T> x = a[i].to_vector<T>(), y = b[i].to_vector<T>();
    CHECK((x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0));
  }
}

std::vector<Array> run_fused(const ir::ElementwiseProgram& program, std::span<const Array> in) {
  const auto scalars = static_cast<std::size_t>(program.num_scalars);
  return lax::fused_elementwise(std::make_shared<const ir::ElementwiseProgram>(program),
                                in.first(scalars), in.subspan(scalars));
}

// The program run whole and as `split`'s stages on `in`: the same bits.
template <class T>
void check_staged_equals_whole(const ir::ElementwiseProgram& program, const ir::SplitProgram& split,
                               const std::vector<Array>& in) {
  const std::vector<Array> whole = run_fused(program, in);
  std::vector<AVal> out;
  for (const Array& r : whole)
    out.push_back(r.aval());
  const std::vector<Array> staged = backend_impl::run_in_stages(
      program, split, in, out,
      [](const ir::ElementwiseProgram& p, std::span<const Array> stage_in,
         std::span<const AVal>) { return run_fused(p, stage_in); });
  check_same_bits<T>(whole, staged);
}

template <class T>
void check_stages_match(const ir::ElementwiseLimits& limits) {
  const auto program = long_program(120);
  const ir::SplitProgram split = ir::split_program(*program, limits);
  CHECK(!ir::fits(*program, limits));
  CHECK(split.stages.size() > 1);
  for (const ir::ElementwiseStage& stage : split.stages) {
    CHECK(ir::fits(*stage.program, limits));
    CHECK(stage.program->aliases.empty());
    stage.program->validate();
  }
  check_staged_equals_whole<T>(*program, split,
                              operands<T>({Shape{3, 4}, Shape{}, Shape{0}, Shape{1000}}));
}

}  // namespace

TEST_CASE("split_program: every stage fits the limits, and the stages give the program's bits") {
  check_stages_match<float>({16, 3});
  check_stages_match<double>({40, 5});
  check_stages_match<float>({1, 3});  // one instruction per stage
}

TEST_CASE("split_program: a program within the limits is one stage equal to it") {
  const auto program = long_program(12);
  const ir::SplitProgram split = ir::split_program(*program, {1000, kScalars});
  REQUIRE(split.stages.size() == 1);
  CHECK(split.stages[0].program->code.size() == program->code.size());
  CHECK(split.results.size() == program->outputs.size());
}

TEST_CASE("split_program: limits below one instruction's operands are a clear error") {
  const auto program = long_program(12);  // its select reads three 0-d operands at most
  CHECK_THROWS_WITH_AS(ir::split_program(*program, {16, 0}),
                       doctest::Contains("needs more than 0 0-d operands"), ValueError);
}

TEST_CASE("fused_elementwise: a program over CUDA's launch limits gives the bits of its stages") {
  // 300 instructions and 17 0-d operands: one launch takes 256 and 16, so on CUDA the backend
  // splits it; on the CPU it runs whole. Either way the result equals the staged run.
  const auto program = long_program(300);
  REQUIRE(program->code.size() > 256);
  check_staged_equals_whole<float>(*program, ir::split_program(*program, {64, 4}),
                                  operands<float>({Shape{7, 33}, Shape{5}}));
}

TEST_CASE("split_program: mask operands stay masks in every stage") {
  ElementwiseBuilder b;
  const EValue x = b.input(), mask = b.mask_input();
  EValue v = x;
  for (int i = 0; i < 6; ++i)
    v = ir::select(mask, v * 0.5 + 1.0, -v);
  b.output(v);
  const auto program = b.finish();
  const ir::SplitProgram split = ir::split_program(*program, {2, 1});
  REQUIRE(split.stages.size() > 1);
  for (const ir::ElementwiseStage& stage : split.stages)
    for (std::size_t j = 0; j < stage.inputs.size(); ++j)
      if (!stage.inputs[j].made)
        CHECK(stage.program->is_mask(static_cast<int>(j)) ==
              program->is_mask(stage.inputs[j].index));
  const std::vector<std::uint8_t> bits{1, 0, 1, 1, 0, 0, 1};
  const std::vector<Array> in{
      Array::from_vector(std::vector<float>{1, -2, 3, -4, 5, -6, 7}, Shape{7}).to(default_device()),
      Array::from_host_bytes(bits.data(), Shape{7}, DType::bool_, default_device())};
  check_staged_equals_whole<float>(*program, split, in);
}
