// Fused programs' row reductions on the CPU (ElementwiseProgram::row_reductions): each row's
// sum and maximum of a program value has the very bits of lax::reduce_sum / lax::reduce_max of
// that value computed apart, for rows shorter than a chunk, straddling none, exactly a chunk,
// and longer than one (folded across chunks), over one, two and all trailing axes, in float32
// and float64, donated or not; the results come after the outputs, of the leading axes' shape.
// The builder's, the validator's and the shape rule's errors. The arrays live on the CPU
// whatever the suite's default device (the CUDA backend does not run row reductions).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/elementwise_program.hpp"
#include "flaxpp/ir/lax.hpp"

using namespace flaxpp;
using ir::ElementwiseBuilder;
using ir::EValue;
using Op = ir::ElementwiseProgram::Op;

namespace {

template <class T>
Array wave(const Shape& shape, double phase) {
  std::vector<T> v(static_cast<std::size_t>(shape.size()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<T>(4.0 * std::sin(0.37 * static_cast<double>(i) + phase));
  return Array::from_vector(v, shape, Device::cpu());
}

template <class T>
std::vector<unsigned char> bytes(const Array& a) {
  const std::vector<T> v = a.to_vector<T>();
  std::vector<unsigned char> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// exp(x - row) * y, its sum and x's maximum along the last `axes` axes, against the
// primitives one at a time.
template <class T>
void check_rows(const Shape& shape, int axes, bool donate) {
  CAPTURE(shape);
  CAPTURE(axes);
  CAPTURE(donate);
  std::vector<std::int64_t> reduced;
  for (std::int64_t k = shape.rank() - axes; k < shape.rank(); ++k)
    reduced.push_back(k);
  std::int64_t length = 1;
  for (const std::int64_t k : reduced)
    length *= shape[k];
  ElementwiseBuilder b;
  const EValue x = b.input(), y = b.input(), row = b.broadcast_input(length);
  const EValue e = ir::exp(x - row) * y;
  b.output(e);
  CHECK(b.reduce_rows(Op::add, e, axes) == 0);
  CHECK(b.reduce_rows(Op::max, x, axes) == 1);
  CHECK(b.reduce_rows(Op::add, x * x, axes) == 2);  // a value that is no output
  const auto program = b.finish();
  CHECK(program->results_per_group() == 4);
  CHECK(program->str().find(" rows(" + std::to_string(axes) + "): add(r") != std::string::npos);

  const Array xa = wave<T>(shape, 0.0), ya = wave<T>(shape, 1.0);
  const Array ra = wave<T>(Shape{shape.size() / std::max<std::int64_t>(length, 1)}, 2.0);
  const Array row_values =
      lax::reshape(lax::broadcast_in_dim(ra, Shape{ra.size(), length}, {0}), shape);
  const Array want_e = lax::mul(lax::exp(lax::sub(xa, row_values)), ya);
  const std::vector<Array> want{want_e, lax::reduce_sum(want_e, reduced),
                                lax::reduce_max(xa, reduced),
                                lax::reduce_sum(lax::mul(xa, xa), reduced)};
  std::vector<Array> operands{donate ? xa.copy() : xa, ya, ra};
  const void* x_data = operands[0].buffer().data();
  const std::vector<Array> got =
      donate ? lax::fused_elementwise_donated(program, {}, std::move(operands))
             : lax::fused_elementwise(program, {}, operands);
  REQUIRE(got.size() == want.size());
  if (donate) CHECK(got[0].buffer().data() == x_data);  // the output took x's buffer
  for (std::size_t k = 0; k < got.size(); ++k) {
    CAPTURE(k);
    CHECK(got[k].shape() == want[k].shape());
    CHECK(bytes<T>(got[k]) == bytes<T>(want[k]));
  }
}

}  // namespace

TEST_CASE("cpu row reductions: each row's fold has the bits of reduce_sum and reduce_max") {
  // Row lengths 1, 7, 64, 65 (chunks of whole rows, 3 of 65 to a chunk), 256 (one chunk),
  // 257 and 600 (across chunks, tails of 1 and 88), over one axis; 2·33 over two; all of a
  // 3·200 array (a 0-d result).
  for (const bool donate : {false, true}) {
    for (const std::int64_t n : {1, 7, 64, 65, 256, 257, 600})
      check_rows<float>(Shape{37, n}, 1, donate);
    check_rows<float>(Shape{5, 2, 33}, 2, donate);
    check_rows<float>(Shape{3, 200}, 2, donate);
    check_rows<double>(Shape{9, 65}, 1, donate);
    check_rows<double>(Shape{4, 300}, 1, donate);
  }
}

TEST_CASE("cpu row reductions: an empty group gives empty results; empty rows the identities") {
  ElementwiseBuilder b;
  const EValue x = b.input();
  b.reduce_rows(Op::add, x, 1);
  b.reduce_rows(Op::max, x, 1);
  const auto program = b.finish();
  const Array empty_rows = Array::from_vector(std::vector<float>{}, Shape{3, 0}, Device::cpu());
  std::vector<Array> got = lax::fused_elementwise(program, {}, std::span(&empty_rows, 1));
  REQUIRE(got.size() == 2);
  CHECK(got[0].to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(got[1].to_vector<float>() == std::vector<float>(3, -INFINITY));
  const Array no_rows = Array::from_vector(std::vector<float>{}, Shape{0, 4}, Device::cpu());
  got = lax::fused_elementwise(program, {}, std::span(&no_rows, 1));
  CHECK(got[0].shape() == Shape{0});
  CHECK(got[1].shape() == Shape{0});
}

TEST_CASE("cpu row reductions: malformed ones are clear errors") {
  {
    ElementwiseBuilder b;
    const EValue x = b.input();
    CHECK_THROWS_WITH_AS(b.reduce_rows(Op::mul, x, 1), doctest::Contains("got mul over 1 axes"),
                         ValueError);
    CHECK_THROWS_WITH_AS(b.reduce_rows(Op::add, x, 0), doctest::Contains("at least one"),
                         ValueError);
    b.reduce_rows(Op::add, x, 2);
    CHECK_THROWS_WITH_AS(b.reduce_rows(Op::max, x, 1), doctest::Contains("over 1 axes after 2"),
                         ValueError);
    const auto program = b.finish();
    const Array flat = wave<float>(Shape{6}, 0.0);
    CHECK_THROWS_WITH_AS(lax::fused_elementwise(program, {}, std::span(&flat, 1)),
                         doctest::Contains("reduces rows of 2 trailing axes; operand 0 is"),
                         ValueError);
  }
  ir::ElementwiseProgram p;
  p.num_inputs = 1;
  p.num_registers = 1;
  p.outputs = {0};
  p.row_reductions = {{Op::add, 0}};
  CHECK_THROWS_WITH_AS(p.validate(), doctest::Contains("1 row reductions over 0 trailing axes"),
                       ValueError);
  p.row_axes = 1;
  p.row_reductions = {{Op::mul, 0}};
  CHECK_THROWS_WITH_AS(p.validate(), doctest::Contains("only add and max reduce rows"), ValueError);
  p.row_reductions = {{Op::max, 3}};
  CHECK_THROWS_WITH_AS(p.validate(), doctest::Contains("register r3 does not exist"), ValueError);
  p.row_reductions = {{Op::max, 0}};
  CHECK_NOTHROW(p.validate());
}
