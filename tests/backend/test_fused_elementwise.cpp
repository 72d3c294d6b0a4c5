// fused_elementwise on the default device: a program gives the very bits of the same
// operations applied one lax primitive at a time, over groups of different shapes in one call;
// the builder's register assignment; the shape rule's errors. ctest runs the suite on the CPU
// and again with FLAXPP_DEVICE=cuda.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/ir/elementwise_program.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "harness/eval_cases.hpp"

using namespace flaxpp;
using ir::ElementwiseBuilder;
using ir::EValue;

namespace {

// The operations an expression uses, on Arrays (one primitive each) and on program Values.
struct ArrayOps {
  static Array sqrt(const Array& x) { return lax::sqrt(x); }
  static Array rsqrt(const Array& x) { return lax::rsqrt(x); }
  static Array square(const Array& x) { return lax::integer_pow(x, 2); }
  static Array select_lt(const Array& a, double b, const Array& t, const Array& f) {
    return lax::select(lax::lt(a, lax::scalar(b, a.dtype())), t, f);
  }
};
struct ProgramOps {
  static EValue sqrt(EValue x) { return ir::sqrt(x); }
  static EValue rsqrt(EValue x) { return ir::rsqrt(x); }
  static EValue square(EValue x) { return ir::integer_pow(x, 2); }
  static EValue select_lt(EValue a, double b, EValue t, EValue f) {
    return ir::select(ir::lt(a, a.builder().constant(b)), t, f);
  }
};

// An Adam-like update with clipping by a scalar s: every instruction kind, constants that
// need rounding (0.1, 1e-8), a scalar operand, and outputs that are inputs' successors.
template <class Ops, class V>
std::vector<V> update(V s, V g, V p, V m, V v) {
  const V m2 = 0.9 * m + (1.0 - 0.9) * g;
  const V v2 = (1.0 - 0.999) * Ops::square(g) + 0.999 * v;
  const V u = m2 / (Ops::sqrt(v2 + 1e-8) + 1e-8);
  const V clipped = Ops::select_lt(s, 1.5, u, (u / s) * 1.5);
  const V scaled = Ops::rsqrt(v2 + 0.1) * -clipped;
  return {p + clipped * -0.01, m2, v2, scaled};
}

// The broadcast tests' program over (..., inner) groups: select(mask, exp(x - row) * middle +
// bias, -1) with a per-row value and a middle run read with `inner`, a bias and a bool mask
// read along the leading axes (inner 1).
std::shared_ptr<const ir::ElementwiseProgram> broadcast_program(std::int64_t inner) {
  ElementwiseBuilder b;
  const EValue x = b.input(), row = b.broadcast_input(inner), bias = b.broadcast_input(1),
               middle = b.broadcast_input(inner), mask = b.broadcast_input(1, /*mask=*/true);
  b.output(ir::select(mask, ir::exp(x - row) * middle + bias, b.constant(-1.0)));
  return b.finish();
}

// The same arithmetic on materialised broadcasts of a (d0, d1, d2) x: row (d0, d1, 1), bias
// (d2,), middle (d1,), mask (d1, d2).
Array broadcast_reference(const Array& x, const Array& row, const Array& bias, const Array& middle,
                          const Array& mask) {
  const Shape& full = x.shape();
  const Array cases[] = {lax::full_like(x, -1.0),
                         lax::exp(x - lax::broadcast_in_dim(row, full, {0, 1, 2})) *
                                 lax::broadcast_in_dim(middle, full, {1}) +
                             lax::broadcast_in_dim(bias, full, {2})};
  return lax::select_n(lax::broadcast_in_dim(mask, full, {1, 2}), cases);
}

template <class T>
Array values(const Shape& shape, double base) {
  std::vector<T> v(static_cast<std::size_t>(shape.size()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<T>(base + 0.37 * static_cast<double>(i) - 0.05 * double(i * i % 7));
  return Array::from_vector(v, shape);
}

template <class T>
void check_matches_primitives(double s_value) {
  ElementwiseBuilder b;
  const EValue s = b.scalar();
  const EValue g = b.input(), p = b.input(), m = b.input(), v = b.input();
  for (const EValue out : update<ProgramOps>(s, g, p, m, v))
    b.output(out);
  const auto program = b.finish();
  CHECK(program->num_registers <= ir::ElementwiseProgram::kMaxRegisters);

  const Array scalar = Array::from_vector(std::vector<T>{static_cast<T>(s_value)}, Shape{});
  std::vector<Array> inputs;
  const std::vector<Shape> shapes = {Shape{3, 4}, Shape{5}, Shape{}, Shape{0}, Shape{1000}};
  for (const Shape& shape : shapes) {
    inputs.push_back(values<T>(shape, -1.0));                      // g
    inputs.push_back(values<T>(shape, 2.0));                       // p
    inputs.push_back(values<T>(shape, 0.25));                      // m
    inputs.push_back(lax::integer_pow(values<T>(shape, 0.5), 2));  // v >= 0
  }
  const std::vector<Array> fused =
      lax::fused_elementwise(program, std::span<const Array>(&scalar, 1), inputs);
  REQUIRE(fused.size() == shapes.size() * 4);
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const std::vector<Array> expected = update<ArrayOps>(scalar, inputs[4 * k], inputs[4 * k + 1],
                                                         inputs[4 * k + 2], inputs[4 * k + 3]);
    for (std::size_t o = 0; o < 4; ++o) {
      CAPTURE(k);
      CAPTURE(o);
      const Array& got = fused[4 * k + o];
      CHECK(got.aval() == AVal{shapes[k], dtype_of<T>});
      CHECK(got.device() == inputs[4 * k].device());
      CHECK(got.to_vector<T>() == expected[o].to_vector<T>());  // the same bits
    }
  }
}

}  // namespace

TEST_CASE(
    "fused_elementwise: a program gives the bits of its operations one primitive at a "
    "time, for every group in one call") {
  SUBCASE("f32, clipping") {
    check_matches_primitives<float>(0.75);
  }
  SUBCASE("f32, not clipping") {
    check_matches_primitives<float>(3.0);
  }
  SUBCASE("f64") {
    check_matches_primitives<double>(0.75);
  }
}

namespace {

// Every pair of these values (zeros of both signs, infinities, NaN, values around the
// branches of tanh, erf and logistic, large ones) as (x, y).
constexpr double kSpecial[] = {
    0.0,  -0.0,  1.0,  -1.0,  0.5,   -2.5, 3.7,           1e-3,           8.5,          -9.5,
    40.0, -90.0, 1e30, 1e-30, 0.125, 2.0,  testing::kInf, -testing::kInf, testing::kNaN};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// One instruction of `op` over every pair of kSpecial against its lax primitive.
template <class T>
void check_operation(ir::ElementwiseProgram::Op op,
                     const std::function<Array(const Array&, const Array&)>& primitive) {
  std::vector<T> xs, ys;
  for (const double x : kSpecial)
    for (const double y : kSpecial) {
      xs.push_back(static_cast<T>(x));
      ys.push_back(static_cast<T>(y));
    }
  const Shape shape{static_cast<std::int64_t>(xs.size())};
  const Array x = Array::from_vector(xs, shape), y = Array::from_vector(ys, shape);
  ElementwiseBuilder b;
  const EValue a = b.input(), c = b.input();
  b.output(b.apply(op, a, c));
  const Array in[] = {x, y};
  const std::vector<Array> fused = lax::fused_elementwise(b.finish(), {}, in);
  Array expected = primitive(x, y);
  if (expected.dtype() == DType::bool_) expected = lax::convert_element_type(expected, dtype_of<T>);
  CHECK(same_bits(fused.at(0).to_vector<T>(), expected.to_vector<T>()));
}

}  // namespace

TEST_CASE("fused_elementwise: every operation of the elementwise list gives its primitive's bits") {
  using Op = ir::ElementwiseProgram::Op;
  const auto check = [](Op op, const std::function<Array(const Array&, const Array&)>& primitive) {
    CAPTURE(kernels::program_op_name(op));
    check_operation<float>(op, primitive);
    check_operation<double>(op, primitive);
  };
#define FLAXPP_CHECK_BINARY(name, ...) \
  check(Op::name, [](const Array& x, const Array& y) { return lax::name(x, y); });
#define FLAXPP_CHECK_UNARY(name, ...) \
  check(Op::name, [](const Array& x, const Array&) { return lax::name(x); });
  FLAXPP_ELEMENTWISE_BINARY(FLAXPP_CHECK_BINARY)
  FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_CHECK_BINARY)
  FLAXPP_ELEMENTWISE_UNARY(FLAXPP_CHECK_UNARY)
#undef FLAXPP_CHECK_BINARY
#undef FLAXPP_CHECK_UNARY
  // The list's primitives and integer_pow and select: every operation a program has.
  int listed = 0;
#define FLAXPP_COUNT(name, ...) ++listed;
  FLAXPP_ELEMENTWISE_BINARY(FLAXPP_COUNT)
  FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_COUNT)
  FLAXPP_ELEMENTWISE_UNARY(FLAXPP_COUNT)
#undef FLAXPP_COUNT
  CHECK(static_cast<int>(Op::select) == listed + 1);
  CHECK(ir::ElementwiseProgram::arity(Op::pow) == 2);
  CHECK(ir::ElementwiseProgram::arity(Op::tanh) == 1);
  CHECK(kernels::program_op_is_comparison(Op::ge));
  CHECK_FALSE(kernels::program_op_is_comparison(Op::max));
}

TEST_CASE("fused_elementwise: registers are reused after their last read; dead code is dropped") {
  ElementwiseBuilder b;
  EValue x = b.input();
  const EValue unused = x * 3.0 + 1.0;  // no output reads it
  (void)unused;
  Array expected = Array::from_vector(std::vector<float>{0.5f, -2.0f, 7.0f}, Shape{3});
  const Array input = expected;
  for (int i = 0; i < 100; ++i) {
    x = x * 1.01 + 0.5;
    expected = expected * 1.01 + 0.5;
  }
  b.output(x);
  const auto program = b.finish();
  CHECK(program->code.size() == 200);
  CHECK(program->constants == std::vector<double>{1.01, 0.5});
  CHECK(program->num_registers == 1 + 2 + 1);  // the input, two constants, one temporary
  const std::vector<Array> out =
      lax::fused_elementwise(program, {}, std::span<const Array>(&input, 1));
  CHECK(out.at(0).to_vector<float>() == expected.to_vector<float>());
  CHECK(
      program->str().starts_with("{scalars=0 inputs=1 constants=(1.01, 0.5); r3=mul(r0, r1); "
                                 "r3=add(r3, r2); r3=mul(r3, r1)"));
}

TEST_CASE("fused_elementwise: a program needing too many registers is a clear error") {
  ElementwiseBuilder b;
  std::vector<EValue> inputs;
  for (int i = 0; i < 40; ++i)
    inputs.push_back(b.input());
  EValue total = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i)
    total = total + inputs[i];
  b.output(total);
  CHECK_THROWS_WITH_AS(b.finish(), doctest::Contains("needs 41 registers, more than the 32"),
                       ValueError);
}

TEST_CASE("fused_elementwise: operands that do not fit the program are clear errors") {
  ElementwiseBuilder b;
  const EValue s = b.scalar();
  b.output(b.input() * s);
  const auto program = b.finish();
  const Array s32 = Array::from_vector(std::vector<float>{2.0f}, Shape{});
  const Array x = Array::from_vector(std::vector<float>{1.0f, 2.0f}, Shape{2});
  const Array x64 = Array::from_vector(std::vector<double>{1.0, 2.0}, Shape{2});
  const Array ints = Array::from_vector(std::vector<std::int32_t>{1, 2}, Shape{2});
  CHECK_THROWS_WITH_AS(lax::fused_elementwise(program, {}, {}),
                       doctest::Contains("takes 1 0-d operands and then groups of 1 arrays; got 0"),
                       ValueError);
  CHECK_THROWS_WITH_AS(
      lax::fused_elementwise(program, std::span<const Array>(&x, 1), std::span<const Array>(&x, 1)),
      doctest::Contains("operand 0 must be 0-d"), ValueError);
  const Array mixed[] = {s32, x64};
  CHECK_THROWS_WITH_AS(
      lax::fused_elementwise(program, std::span<const Array>(mixed, 1), std::span(mixed + 1, 1)),
      doctest::Contains("one dtype"), ValueError);
  CHECK_THROWS_WITH_AS(
      lax::fused_elementwise(program, std::span<const Array>(&s32, 1), std::span(&ints, 1)),
      doctest::Contains("floating"), ValueError);

  ElementwiseBuilder b2;
  b2.output(b2.input() + b2.input());
  const Array y = Array::from_vector(std::vector<float>{1.0f, 2.0f, 3.0f}, Shape{3});
  const Array pair[] = {x, y};
  CHECK_THROWS_WITH_AS(lax::fused_elementwise(b2.finish(), {}, pair),
                       doctest::Contains("the arrays of a group must have one shape"), ValueError);
}

TEST_CASE("fused_elementwise: a mask operand (a bool array) reads as 1 or 0 and keeps its buffer") {
  // relu's backward pass: select_n(mask, zeros, g), and the mask as a value.
  ElementwiseBuilder b;
  const EValue g = b.input(), mask = b.mask_input();
  b.output(ir::select(mask, g, b.constant(0.0)));
  b.output(mask * 2.0 + g);
  const auto program = b.finish();
  CHECK(program->is_mask(1));
  CHECK(!program->is_mask(0));
  CHECK(program->str().find("masks=(1)") != std::string::npos);
  CHECK(program->donations({true, true}) == std::vector<int>{0, -1});  // never the mask's bytes
  const std::vector<float> gv{1.5f, -2.0f, 3.0f, -0.5f, 7.0f};
  const std::vector<std::uint8_t> bits{1, 0, 0, 1, 1};
  for (const DType dtype : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dtype));
    const Array garr = astype(Array::from_vector(gv, Shape{5}), dtype);
    const Array marr =
        Array::from_host_bytes(bits.data(), Shape{5}, DType::bool_, default_device());
    const Array zeros = lax::full_like(garr, 0.0);
    const Array cases[] = {zeros, garr};
    const Array want0 = lax::select_n(marr, cases);
    const Array want1 = lax::convert_element_type(marr, dtype) * 2.0 + garr;
    std::vector<Array> donated{astype(Array::from_vector(gv, Shape{5}), dtype), marr};
    const std::vector<Array> got = lax::fused_elementwise_donated(program, {}, std::move(donated));
    REQUIRE(got.size() == 2);
    CHECK(got[0].dtype() == dtype);
    CHECK(astype(got[0], DType::f64).to_vector<double>() ==
          astype(want0, DType::f64).to_vector<double>());
    CHECK(astype(got[1], DType::f64).to_vector<double>() ==
          astype(want1, DType::f64).to_vector<double>());
    // The mask is read, not written.
    CHECK(astype(marr, DType::f32).to_vector<float>() == std::vector<float>{1, 0, 0, 1, 1});
  }
  // A mask must be bool; a program needs a floating operand for its dtype.
  const Array x = Array::from_vector(std::vector<float>{1.0f, 2.0f}, Shape{2});
  const Array two_floats[] = {x, x};
  CHECK_THROWS_WITH_AS(lax::fused_elementwise(program, {}, two_floats),
                       doctest::Contains("operand 1 is a mask and must be bool"), ValueError);
  ElementwiseBuilder masks_only;
  masks_only.output(masks_only.mask_input() * 3.0);
  const Array m = Array::from_host_bytes(bits.data(), Shape{5}, DType::bool_, default_device());
  CHECK_THROWS_WITH_AS(lax::fused_elementwise(masks_only.finish(), {}, std::span(&m, 1)),
                       doctest::Contains("reads masks only"), ValueError);
  ElementwiseBuilder aliased;
  const EValue mi = aliased.mask_input();
  CHECK_THROWS_WITH_AS(aliased.output(mi * 2.0, mi),
                       doctest::Contains("can replace an input() only"), ValueError);
}

TEST_CASE("fused_elementwise: broadcast operands over many chunks, runs starting mid-row") {
  // (5, 7, 97) float32 arrays (over a thousand elements, so the CPU's 256-element chunks start
  // inside rows and inside a bias's run): a per-row value (5, 7, 1) (inner 97), a bias (97,)
  // (inner 1), a middle run (7,) (inner 97) and a bool mask (7, 97) (inner 1), against the
  // same arithmetic on materialised broadcasts, bit for bit.
  const auto program = broadcast_program(97);
  const Shape full{5, 7, 97};
  const auto wave = [](std::int64_t n, float step) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = std::sin(step * static_cast<float>(i));
    return v;
  };
  std::vector<std::uint8_t> bits(7 * 97);
  for (std::size_t i = 0; i < bits.size(); ++i)
    bits[i] = static_cast<std::uint8_t>(i % 3 != 0);
  const Array xa = Array::from_vector(wave(full.size(), 0.01f), full),
              ra = Array::from_vector(wave(35, 0.3f), Shape{5, 7, 1}),
              ba = Array::from_vector(wave(97, 0.7f), Shape{97}),
              ma = Array::from_vector(wave(7, 1.1f), Shape{7});
  const Array mask_a =
      Array::from_host_bytes(bits.data(), Shape{7, 97}, DType::bool_, default_device());
  const Array want = broadcast_reference(xa, ra, ba, ma, mask_a);
  const Array operands[] = {xa, ra, ba, ma, mask_a};
  const std::vector<Array> got = lax::fused_elementwise(program, {}, operands);
  REQUIRE(got.size() == 1);
  CHECK(got[0].to_vector<float>() == want.to_vector<float>());
}

TEST_CASE("fused_elementwise: broadcast operands are read repeatedly, never written") {
  // (2, 3, 4) arrays: a per-row value (2, 3) read along the last axis (inner 4), a bias (4,)
  // along the leading ones (inner 1), a middle run (3,) (inner 4) and a bool mask (3, 4)
  // (inner 1): against the same arithmetic on materialised broadcasts, bit for bit.
  const auto program = broadcast_program(4);
  CHECK(program->str().find("broadcasts=(1/4, 2/1, 3/4, 4/1)") != std::string::npos);
  CHECK(program->donations({true, true, true, true, true}) == std::vector<int>{0});
  const Shape full{2, 3, 4};
  std::vector<float> xv(24), rv(6), bv(4), mv(3);
  for (std::size_t i = 0; i < xv.size(); ++i)
    xv[i] = 0.25f * static_cast<float>(i) - 2.0f;
  for (std::size_t i = 0; i < rv.size(); ++i)
    rv[i] = 0.5f * static_cast<float>(i);
  for (std::size_t i = 0; i < bv.size(); ++i)
    bv[i] = static_cast<float>(i) - 1.5f;
  for (std::size_t i = 0; i < mv.size(); ++i)
    mv[i] = 1.0f + static_cast<float>(i);
  const std::vector<std::uint8_t> bits{1, 0, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1};
  for (const DType dtype : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dtype));
    const auto arr = [&](const std::vector<float>& v, Shape shape) {
      return astype(Array::from_vector(v, shape), dtype);
    };
    const Array xa = arr(xv, full), ra = arr(rv, Shape{2, 3, 1}), ba = arr(bv, Shape{4}),
                ma = arr(mv, Shape{3});
    const Array mask_a =
        Array::from_host_bytes(bits.data(), Shape{3, 4}, DType::bool_, default_device());
    const Array want = broadcast_reference(xa, ra, ba, ma, mask_a);
    const Array operands[] = {xa, ra, ba, ma, mask_a};
    const std::vector<Array> got = lax::fused_elementwise(program, {}, operands);
    REQUIRE(got.size() == 1);
    CHECK(got[0].shape() == full);
    CHECK(astype(got[0], DType::f64).to_vector<double>() ==
          astype(want, DType::f64).to_vector<double>());
    // Donated, the result takes operand 0's buffer, never a broadcast operand's.
    std::vector<Array> donated{astype(xa, dtype), astype(ra, dtype), astype(ba, dtype),
                               astype(ma, dtype), mask_a};
    const void* row_bytes = donated[1].buffer().data();
    const std::vector<Array> in_place =
        lax::fused_elementwise_donated(program, {}, std::move(donated));
    CHECK(in_place[0].buffer().data() != row_bytes);
    CHECK(astype(in_place[0], DType::f64).to_vector<double>() ==
          astype(want, DType::f64).to_vector<double>());
  }
  // An operand that does not tile the group is a clear error; operand 0 is never a broadcast.
  const Array x6 = Array::from_vector(std::vector<float>(6, 1.0f), Shape{6});
  const Array x4 = Array::from_vector(std::vector<float>(4, 1.0f), Shape{4});
  ElementwiseBuilder rows;
  const EValue e0 = rows.input();
  rows.output(e0 + rows.broadcast_input(3));
  const Array bad[] = {x6, x4};
  CHECK_THROWS_WITH_AS(lax::fused_elementwise(rows.finish(), {}, bad),
                       doctest::Contains("does not tile operand"), ValueError);
  ElementwiseBuilder first;
  CHECK_THROWS_WITH_AS((void)first.broadcast_input(2),
                       doctest::Contains("element-by-element operand before it"), ValueError);
}

TEST_CASE("fused_elementwise_donated: results take the buffers of inputs nothing else holds") {
  ElementwiseBuilder b;
  const EValue x = b.input(), y = b.input();
  b.output(x * y);
  b.output(x + y);
  const auto program = b.finish();
  auto ramp = [] { return Array::from_vector(std::vector<float>{1.0f, 2.0f, 3.0f}, Shape{3}); };
  const std::vector<float> product{1.0f, 4.0f, 9.0f}, sum{2.0f, 4.0f, 6.0f};

  // The caller keeps x: only y's buffer is free, and x keeps its values.
  const Array kept = ramp();
  std::vector<Array> inputs{kept, ramp()};
  const void* y_data = inputs[1].buffer().data();
  std::vector<Array> out = lax::fused_elementwise_donated(program, {}, std::move(inputs));
  CHECK(out[0].buffer().data() == y_data);  // the first result takes the first free buffer
  CHECK(out[1].buffer().data() != kept.buffer().data());
  CHECK(kept.to_vector<float>() == std::vector<float>{1.0f, 2.0f, 3.0f});
  CHECK(out[0].to_vector<float>() == product);
  CHECK(out[1].to_vector<float>() == sum);

  // Both given up: no new buffer at all.
  std::vector<Array> both{ramp(), ramp()};
  const void* x_data = both[0].buffer().data();
  y_data = both[1].buffer().data();
  out = lax::fused_elementwise_donated(program, {}, std::move(both));
  CHECK(out[0].buffer().data() == x_data);
  CHECK(out[1].buffer().data() == y_data);
  CHECK(out[0].to_vector<float>() == product);
  CHECK(out[1].to_vector<float>() == sum);

  // Without donation nothing is reused, even for arrays only the operands hold.
  std::vector<Array> plain{ramp(), ramp()};
  x_data = plain[0].buffer().data();
  out = lax::fused_elementwise(program, {}, plain);
  CHECK(out[0].buffer().data() != x_data);
}

TEST_CASE(
    "fused_elementwise_donated: an aliased result takes the buffer of the input it replaces") {
  // Results in the order (new y, new x): without aliases the first takes x's buffer.
  ElementwiseBuilder b;
  const EValue x = b.input(), y = b.input();
  b.output(y - x, y);
  b.output(x * 2.0, x);
  const auto program = b.finish();
  CHECK(program->str().find("@in1") != std::string::npos);
  auto ramp = [] { return Array::from_vector(std::vector<float>{1.0f, 2.0f, 3.0f}, Shape{3}); };
  std::vector<Array> both{ramp(), ramp()};
  const void* x_data = both[0].buffer().data();
  const void* y_data = both[1].buffer().data();
  std::vector<Array> out = lax::fused_elementwise_donated(program, {}, std::move(both));
  CHECK(out[0].buffer().data() == y_data);
  CHECK(out[1].buffer().data() == x_data);
  CHECK(out[0].to_vector<float>() == std::vector<float>{0.0f, 0.0f, 0.0f});
  CHECK(out[1].to_vector<float>() == std::vector<float>{2.0f, 4.0f, 6.0f});

  // The aliased input is kept by the caller: its result takes another free buffer instead.
  const Array kept = ramp();
  std::vector<Array> one_free{ramp(), kept};
  x_data = one_free[0].buffer().data();
  out = lax::fused_elementwise_donated(program, {}, std::move(one_free));
  CHECK(out[1].buffer().data() == x_data);  // its own input
  CHECK(out[0].buffer().data() != kept.buffer().data());
  CHECK(kept.to_vector<float>() == std::vector<float>{1.0f, 2.0f, 3.0f});

  // Two inputs passed through, each into the other's buffer: a swap, with both donated.
  ElementwiseBuilder swap;
  const EValue sx = swap.input(), sy = swap.input();
  swap.output(sy, sx);
  swap.output(sx, sy);
  std::vector<float> xs(600), ys(600);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    xs[i] = static_cast<float>(i);
    ys[i] = -static_cast<float>(i) - 0.5f;
  }
  std::vector<Array> pair{Array::from_vector(xs, Shape{600}), Array::from_vector(ys, Shape{600})};
  x_data = pair[0].buffer().data();
  out = lax::fused_elementwise_donated(swap.finish(), {}, std::move(pair));
  CHECK(out[0].buffer().data() == x_data);
  CHECK(out[0].to_vector<float>() == ys);
  CHECK(out[1].to_vector<float>() == xs);

  ElementwiseBuilder bad;
  const EValue in = bad.input();
  CHECK_THROWS_WITH_AS(bad.output(in * 2.0, in * 3.0), doctest::Contains("input() only"),
                       ValueError);
  ir::ElementwiseProgram twice = *program;
  twice.aliases = {0, 0};
  CHECK_THROWS_WITH_AS(twice.validate(), doctest::Contains("aliased by two outputs"), ValueError);
  twice.aliases = {2, -1};
  CHECK_THROWS_WITH_AS(twice.validate(), doctest::Contains("aliases operand 2 of 2"), ValueError);
}

TEST_CASE("fused_elementwise: a malformed program is a clear error, not an out-of-range access") {
  const Array x = Array::from_vector(std::vector<float>{1.0f, 2.0f}, Shape{2});
  auto program = [](auto edit) {
    ir::ElementwiseProgram p;
    p.num_inputs = 1;
    p.num_registers = 2;
    p.code = {{ir::ElementwiseProgram::Op::neg, 1, 0, 0, 0, 0}};
    p.outputs = {1};
    edit(p);
    return std::make_shared<const ir::ElementwiseProgram>(p);
  };
  CHECK(lax::fused_elementwise(program([](auto&) {}), {}, std::span(&x, 1))[0].to_vector<float>() ==
        std::vector<float>{-1.0f, -2.0f});
  CHECK_THROWS_WITH_AS(
      lax::fused_elementwise(program([](auto& p) { p.code[0].dst = 0; }), {}, std::span(&x, 1)),
      doctest::Contains("r0 is written, but only temporaries"), ValueError);
  CHECK_THROWS_WITH_AS(
      lax::fused_elementwise(program([](auto& p) { p.outputs = {7}; }), {}, std::span(&x, 1)),
      doctest::Contains("output register r7 does not exist"), ValueError);
  CHECK_THROWS_WITH_AS(lax::fused_elementwise(program([](auto& p) { p.outputs.assign(40, 1); }), {},
                                              std::span(&x, 1)),
                       doctest::Contains("40 outputs"), ValueError);
  CHECK_THROWS_WITH_AS(
      lax::fused_elementwise(program([](auto& p) { p.num_registers = 64; }), {}, std::span(&x, 1)),
      doctest::Contains("at most 32"), ValueError);
}
