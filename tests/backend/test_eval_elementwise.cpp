// Evaluation of the elementwise lax primitives on the default device: binary arithmetic,
// 0-d broadcasting, max/min with NaN and signed zeros, comparisons, unary float functions,
// integer arithmetic and integer_pow, select_n and convert_element_type, in f32 and f64 and
// the integer and bool dtypes.
// ctest runs the suite on the CPU and again with FLAXPP_DEVICE=cuda, so both backends meet
// the same cases; the tables and their runner are in harness/eval_cases.hpp.
#include <doctest/doctest.h>

#include "harness/eval_cases.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/kernels/elementwise.hpp"
#include "flaxpp/transforms/jit.hpp"

using namespace flaxpp;
using namespace flaxpp::testing;

TEST_CASE("eval: add sub mul div max min match hand-computed values in f32 and f64") {
  std::vector<Case> cases;
  for (const DType dt : kFloats) {
    const Array x = make(dt, {2, 2}, {1, -2, 3.5, 0.25});
    const Array y = make(dt, {2, 2}, {4, 0.5, -1, 0.25});
    const AVal out{{2, 2}, dt};
    cases.push_back({name("add", dt), [=] { return lax::add(x, y); }, out, {5, -1.5, 2.5, 0.5}});
    cases.push_back({name("sub", dt), [=] { return lax::sub(x, y); }, out, {-3, -2.5, 4.5, 0}});
    cases.push_back({name("mul", dt), [=] { return lax::mul(x, y); }, out, {4, -1, -3.5, 0.0625}});
    cases.push_back({name("div", dt), [=] { return lax::div(x, y); }, out, {0.25, -4, -3.5, 1}});
    cases.push_back({name("max", dt), [=] { return lax::max(x, y); }, out, {4, 0.5, 3.5, 0.25}});
    cases.push_back({name("min", dt), [=] { return lax::min(x, y); }, out, {1, -2, -1, 0.25}});
    const Array ones = make(dt, {2}, {1, -1});
    const Array zeros = make(dt, {2}, {0, 0});
    cases.push_back({name("div by zero is +-inf", dt),
                     [=] { return lax::div(ones, zeros); },
                     {{2}, dt},
                     {kInf, -kInf}});
  }
  run_cases(cases);
}

TEST_CASE("eval: a 0-d operand broadcasts against the other in binary ops") {
  std::vector<Case> cases;
  for (const DType dt : {DType::f32, DType::f64, DType::i32}) {
    const Array x = make(dt, {2, 2}, {1, -2, 3, 4});
    const AVal out{{2, 2}, dt};
    const Array ten = make(dt, {}, {10});
    const Array two = make(dt, {}, {2});
    cases.push_back(
        {name("add(0-d, x)", dt), [=] { return lax::add(ten, x); }, out, {11, 8, 13, 14}});
    cases.push_back(
        {name("sub(x, 0-d)", dt), [=] { return lax::sub(x, two); }, out, {-1, -4, 1, 2}});
    cases.push_back(
        {name("mul(x, 0-d)", dt), [=] { return lax::mul(x, two); }, out, {2, -4, 6, 8}});
    cases.push_back({name("max(x, 0-d)", dt), [=] { return lax::max(x, two); }, out, {2, 2, 3, 4}});
    cases.push_back({name("lt(x, 0-d)", dt),
                     [=] { return lax::lt(x, two); },
                     {{2, 2}, DType::bool_},
                     {1, 1, 0, 0}});
    cases.push_back(
        {name("add(0-d, 0-d)", dt), [=] { return lax::add(ten, two); }, {{}, dt}, {12}});
  }
  for (const DType dt : kFloats) {
    const Array one = make(dt, {}, {1});
    const Array y = make(dt, {4}, {4, 0.5, -1, 0.25});
    cases.push_back(
        {name("div(0-d, y)", dt), [=] { return lax::div(one, y); }, {{4}, dt}, {0.25, 2, -1, 4}});
  }
  run_cases(cases);
}

TEST_CASE("eval: max and min propagate NaN from either side and order -0 below +0") {
  for (const DType dt : kFloats) {
    INFO(dtype_name(dt));
    const Array x = make(dt, {5}, {kNaN, 1, 2, -0.0, 0.0});
    const Array y = make(dt, {5}, {0, kNaN, 1, 0.0, -0.0});
    const std::vector<double> mx = values_of(lax::max(x, y));
    const std::vector<double> mn = values_of(lax::min(x, y));
    CHECK(std::isnan(mx[0]));
    CHECK(std::isnan(mx[1]));
    CHECK(mx[2] == 2);
    CHECK((mx[3] == 0 && !std::signbit(mx[3]) && mx[4] == 0 && !std::signbit(mx[4])));
    CHECK(std::isnan(mn[0]));
    CHECK(std::isnan(mn[1]));
    CHECK(mn[2] == 1);
    CHECK((mn[3] == 0 && std::signbit(mn[3]) && mn[4] == 0 && std::signbit(mn[4])));
  }
}

TEST_CASE("eval: comparisons give bool for floats (NaN compares unequal), ints and bools") {
  std::vector<Case> cases;
  const AVal out{{4}, DType::bool_};
  for (const DType dt : kFloats) {
    const Array x = make(dt, {4}, {1, 2, 3, kNaN});
    const Array y = make(dt, {4}, {2, 2, 2, 2});
    cases.push_back({name("eq", dt), [=] { return lax::eq(x, y); }, out, {0, 1, 0, 0}});
    cases.push_back({name("ne", dt), [=] { return lax::ne(x, y); }, out, {1, 0, 1, 1}});
    cases.push_back({name("lt", dt), [=] { return lax::lt(x, y); }, out, {1, 0, 0, 0}});
    cases.push_back({name("le", dt), [=] { return lax::le(x, y); }, out, {1, 1, 0, 0}});
    cases.push_back({name("gt", dt), [=] { return lax::gt(x, y); }, out, {0, 0, 1, 0}});
    cases.push_back({name("ge", dt), [=] { return lax::ge(x, y); }, out, {0, 1, 1, 0}});
  }
  for (const DType dt : {DType::i32, DType::u32}) {
    const Array x = make(dt, {4}, {1, 2, 3, 4});
    const Array y = make(dt, {4}, {2, 2, 2, 2});
    cases.push_back({name("eq", dt), [=] { return lax::eq(x, y); }, out, {0, 1, 0, 0}});
    cases.push_back({name("ne", dt), [=] { return lax::ne(x, y); }, out, {1, 0, 1, 1}});
    cases.push_back({name("lt", dt), [=] { return lax::lt(x, y); }, out, {1, 0, 0, 0}});
    cases.push_back({name("le", dt), [=] { return lax::le(x, y); }, out, {1, 1, 0, 0}});
    cases.push_back({name("gt", dt), [=] { return lax::gt(x, y); }, out, {0, 0, 1, 1}});
    cases.push_back({name("ge", dt), [=] { return lax::ge(x, y); }, out, {0, 1, 1, 1}});
  }
  const Array p = make(DType::bool_, {4}, {1, 1, 0, 0});
  const Array q = make(DType::bool_, {4}, {1, 0, 1, 0});
  cases.push_back({"eq bool", [=] { return lax::eq(p, q); }, out, {1, 0, 0, 1}});
  cases.push_back({"ne bool", [=] { return lax::ne(p, q); }, out, {0, 1, 1, 0}});
  cases.push_back({"lt bool (false < true)", [=] { return lax::lt(p, q); }, out, {0, 0, 1, 0}});
  cases.push_back({"gt bool", [=] { return lax::gt(p, q); }, out, {0, 1, 0, 0}});
  run_cases(cases);
}

TEST_CASE("eval: unary float primitives match the math library in f32 and f64") {
  std::vector<Case> cases;
  for (const DType dt : kFloats) {
    const Array x = make(dt, {6}, {-2, -0.5, 0, 0.5, 1, 3});
    const Array pos = make(dt, {4}, {0.25, 1, 2, 4});
    const AVal out6{{6}, dt};
    const AVal out4{{4}, dt};
    cases.push_back(
        {name("neg", dt), [=] { return lax::neg(x); }, out6, {2, 0.5, 0, -0.5, -1, -3}});
    cases.push_back({name("abs", dt), [=] { return lax::abs(x); }, out6, {2, 0.5, 0, 0.5, 1, 3}});
    const Array s = make(dt, {4}, {-2, 0, 3, kNaN});
    cases.push_back({name("sign", dt), [=] { return lax::sign(s); }, out4, {-1, 0, 1, kNaN}});
    cases.push_back({name("exp", dt),
                     [=] { return lax::exp(x); },
                     out6,
                     {0.1353352832366127, 0.6065306597126334, 1.0, 1.6487212707001282,
                      2.718281828459045, 20.085536923187668}});
    cases.push_back({name("tanh", dt),
                     [=] { return lax::tanh(x); },
                     out6,
                     {-0.9640275800758169, -0.46211715726000974, 0.0, 0.46211715726000974,
                      0.7615941559557649, 0.9950547536867305}});
    cases.push_back({name("logistic", dt),
                     [=] { return lax::logistic(x); },
                     out6,
                     {0.11920292202211755, 0.3775406687981454, 0.5, 0.6224593312018546,
                      0.7310585786300049, 0.9525741268224334}});
    const Array big = make(dt, {2}, {-1000, 1000});
    cases.push_back({name("logistic saturates to exactly 0 and 1", dt),
                     [=] { return lax::logistic(big); },
                     {{2}, dt},
                     {0, 1}});
    cases.push_back({name("erf", dt),
                     [=] { return lax::erf(x); },
                     out6,
                     {-0.9953222650189527, -0.5204998778130465, 0.0, 0.5204998778130465,
                      0.8427007929497149, 0.9999779095030014}});
    cases.push_back({name("log", dt),
                     [=] { return lax::log(pos); },
                     out4,
                     {-1.3862943611198906, 0.0, 0.6931471805599453, 1.3862943611198906}});
    cases.push_back({name("sqrt", dt),
                     [=] { return lax::sqrt(pos); },
                     out4,
                     {0.5, 1.0, 1.4142135623730951, 2.0}});
    cases.push_back({name("rsqrt", dt),
                     [=] { return lax::rsqrt(pos); },
                     out4,
                     {2.0, 1.0, 0.7071067811865475, 0.5}});
    cases.push_back(
        {name("log1p", dt),
         [=] { return lax::log1p(pos); },
         out4,
         {0.22314355131420976, 0.6931471805599453, 1.0986122886681096, 1.6094379124341003}});
    const Array tiny = make(dt, {}, {1e-10});
    cases.push_back({name("log1p keeps a tiny x", dt),
                     [=] { return lax::log1p(tiny); },
                     {{}, dt},
                     {9.999999999500001e-11}});
    const Array edge = make(dt, {2}, {0, -1});
    cases.push_back({name("log(0) is -inf, log(-1) NaN", dt),
                     [=] { return lax::log(edge); },
                     {{2}, dt},
                     {-kInf, kNaN}});
  }
  run_cases(cases);
}

TEST_CASE("eval: tanh in float32 equals jnp.tanh on JAX's CPU backend bit for bit") {
  // jnp.tanh of these float32 inputs (JAX 0.10.2, CPU), up to 5 ulp from the exact tanh.
  const std::vector<float> x{-5.5f, -2.25f, -1.0f, -0.3f, -1e-3f,   0.0f,     2e-4f,
                             0.7f,  1.5f,   3.0f,  9.0f,  INFINITY, -INFINITY};
  const std::vector<float> want{-0.9999666213989258f,
                                -0.9780261516571045f,
                                -0.7615941762924194f,
                                -0.2913126051425934f,
                                -0.000999999581836164f,
                                0.0f,
                                0.00019999999494757503f,
                                0.6043677926063538f,
                                0.9051482081413269f,
                                0.9950547218322754f,
                                1.0f,
                                1.0f,
                                -1.0f};
  const Array y = lax::tanh(Array::from_vector(x, Shape{static_cast<std::int64_t>(x.size())}));
  CHECK(y.to_vector<float>() == want);
  CHECK(std::isnan(lax::tanh(make(DType::f32, {1}, {kNaN})).to_vector<float>()[0]));
}

TEST_CASE("eval: pow, cos and sin match their values in f32 and f64") {
  std::vector<Case> cases;
  for (const DType dt : kFloats) {
    const Array x = make(dt, {4}, {0.5, 2, 1.5, 0});
    const Array y = make(dt, {4}, {-2.5, 10, 2, 2});
    cases.push_back({name("pow", dt),
                     [=] { return lax::pow(x, y); },
                     {{4}, dt},
                     {5.656854249492381, 1024, 2.25, 0}});
    const Array t = make(dt, {3}, {0, 0.5, -1.25});
    cases.push_back({name("cos", dt),
                     [=] { return lax::cos(t); },
                     {{3}, dt},
                     {1, 0.8775825618903728, 0.3153223623952687}});
    cases.push_back({name("sin", dt),
                     [=] { return lax::sin(t); },
                     {{3}, dt},
                     {0, 0.479425538604203, -0.9489846193555862}});
  }
  run_cases(cases);
}

TEST_CASE("eval: pow, cos and sin in float32 equal jnp's on JAX's CPU backend bit for bit") {
  // XLA's CPU backend calls the C library's powf, cosf and sinf; CUDA's are within 2 ulp.
  if (default_device() != Device::cpu()) return;
  const auto f32 = [](std::vector<float> v) {
    return Array::from_vector(v, Shape{static_cast<std::int64_t>(v.size())});
  };
  // jnp.power, jnp.cos and jnp.sin of these float32 inputs (JAX 0.10.2, CPU).
  const Array x = f32({0.999f, 0.5f, 1.5f, 2.0f, 0.0f, 3.7f});
  const Array y = f32({17.0f, -2.5f, 0.3f, 10.0f, 2.0f, -0.7f});
  CHECK(lax::pow(x, y).to_vector<float>() ==
        std::vector<float>{0.9831355214118958f, 5.656854152679443f, 1.1293469667434692f, 1024.0f,
                           0.0f, 0.40018314123153687f});
  const Array t = f32({0.0f, 0.5f, -1.25f, 3.14159265f, 100.0f, 1e4f});
  CHECK(lax::cos(t).to_vector<float>() ==
        std::vector<float>{1.0f, 0.8775825500488281f, 0.3153223693370819f, -1.0f,
                           0.8623188734054565f, -0.952155351638794f});
  CHECK(lax::sin(t).to_vector<float>() ==
        std::vector<float>{0.0f, 0.4794255495071411f, -0.9489846229553223f,
                           -8.742277657347586e-08f, -0.5063656568527222f, -0.3056143820285797f});
}

TEST_CASE("eval: integer arithmetic truncates, wraps and divides by zero like XLA") {
  const DType i32 = DType::i32, u32 = DType::u32;
  const Array x = make(i32, {4}, {7, -7, 5, -9});
  const Array y = make(i32, {4}, {2, 2, -3, 4});
  const AVal out{{4}, i32};
  const Array big = make(i32, {3}, {kI32Max, 65536, kI32Min});
  const Array num = make(i32, {3}, {1, -1, kI32Min});
  const Array den = make(i32, {3}, {0, 0, -1});
  const Array n = make(i32, {4}, {-7, 0, 5, kI32Min});
  const Array a = make(u32, {3}, {5, 7, 0});
  const Array b = make(u32, {3}, {7, 0, 1});
  const Array c = make(u32, {3}, {0, 1, 7});
  run_cases({
      {"add i32", [=] { return lax::add(x, y); }, out, {9, -5, 2, -5}},
      {"sub i32", [=] { return lax::sub(x, y); }, out, {5, -9, 8, -13}},
      {"mul i32", [=] { return lax::mul(x, y); }, out, {14, -14, -15, -36}},
      {"div i32 truncates toward zero", [=] { return lax::div(x, y); }, out, {3, -3, -1, -2}},
      {"max i32", [=] { return lax::max(x, y); }, out, {7, 2, 5, 4}},
      {"min i32", [=] { return lax::min(x, y); }, out, {2, -7, -3, -9}},
      {"add and mul i32 wrap around",
       [=] {
         return lax::mul(big, make(i32, {3}, {1, 65536, 1}));
       },
       {{3}, i32},
       {kI32Max, 0, kI32Min}},
      {"add i32 overflows to INT32_MIN",
       [=] { return lax::add(make(i32, {}, {kI32Max}), make(i32, {}, {1})); },
       {{}, i32},
       {kI32Min}},
      {"div i32 by zero is -1, INT32_MIN / -1 is INT32_MIN",
       [=] { return lax::div(num, den); },
       {{3}, i32},
       {-1, -1, kI32Min}},
      {"neg i32 wraps INT32_MIN", [=] { return lax::neg(n); }, out, {7, 0, -5, kI32Min}},
      {"abs i32 wraps INT32_MIN", [=] { return lax::abs(n); }, out, {7, 0, 5, kI32Min}},
      {"sign i32", [=] { return lax::sign(n); }, out, {-1, 0, 1, -1}},
      {"sub u32 wraps", [=] { return lax::sub(a, b); }, {{3}, u32}, {kU32Max - 1, 7, kU32Max}},
      {"div u32 by zero is UINT32_MAX",
       [=] { return lax::div(a, b); },
       {{3}, u32},
       {0, kU32Max, 0}},
      {"max u32 compares unsigned",
       [=] {
         return lax::max(make(u32, {2}, {1, kU32Max}), make(u32, {2}, {2, 0}));
       },
       {{2}, u32},
       {2, kU32Max}},
      {"neg u32 wraps", [=] { return lax::neg(c); }, {{3}, u32}, {0, kU32Max, kU32Max - 6}},
      {"abs u32 is the identity", [=] { return lax::abs(c); }, {{3}, u32}, {0, 1, 7}},
      {"sign u32", [=] { return lax::sign(c); }, {{3}, u32}, {0, 1, 1}},
  });
}

TEST_CASE("eval: integer_pow for y = 0, 1, 2, 3, 5 and -2 in floats and ints") {
  std::vector<Case> cases;
  for (const DType dt : kFloats) {
    const Array x = make(dt, {4}, {-2, -1, 0.5, 3});
    const AVal out{{4}, dt};
    cases.push_back({name("y=0", dt), [=] { return lax::integer_pow(x, 0); }, out, {1, 1, 1, 1}});
    cases.push_back(
        {name("y=1", dt), [=] { return lax::integer_pow(x, 1); }, out, {-2, -1, 0.5, 3}});
    cases.push_back(
        {name("y=2", dt), [=] { return lax::integer_pow(x, 2); }, out, {4, 1, 0.25, 9}});
    cases.push_back(
        {name("y=3", dt), [=] { return lax::integer_pow(x, 3); }, out, {-8, -1, 0.125, 27}});
    cases.push_back(
        {name("y=5", dt), [=] { return lax::integer_pow(x, 5); }, out, {-32, -1, 0.03125, 243}});
    cases.push_back(
        {name("y=-2", dt), [=] { return lax::integer_pow(x, -2); }, out, {0.25, 1, 4, 1.0 / 9.0}});
    const Array odd = make(dt, {3}, {kNaN, 0, kInf});
    cases.push_back({name("y=0 of NaN, 0 and inf is 1", dt),
                     [=] { return lax::integer_pow(odd, 0); },
                     {{3}, dt},
                     {1, 1, 1}});
  }
  const Array xi = make(DType::i32, {4}, {-3, 2, 0, 5});
  const AVal outi{{4}, DType::i32};
  cases.push_back({"y=0 i32", [=] { return lax::integer_pow(xi, 0); }, outi, {1, 1, 1, 1}});
  cases.push_back({"y=2 i32", [=] { return lax::integer_pow(xi, 2); }, outi, {9, 4, 0, 25}});
  cases.push_back({"y=3 i32", [=] { return lax::integer_pow(xi, 3); }, outi, {-27, 8, 0, 125}});
  run_cases(cases);
}

TEST_CASE("eval: integer_pow over many blocks gives the functor's bits, eager and fused") {
  // 1000 elements: several of the CPU's 256-element blocks and a partial one.
  std::vector<float> xs(1000);
  for (std::size_t i = 0; i < xs.size(); ++i)
    xs[i] = 0.37f * static_cast<float>(i % 23) - 3.1f + 1e-3f * static_cast<float>(i);
  const Array x = Array::from_vector(xs, Shape{1000});
  // Exponents whose first set bit comes first, after squarings, or never.
  for (const std::int64_t y : {0, 1, 2, 3, 4, 6, 7, -3}) {
    CAPTURE(y);
    std::vector<float> want(xs.size());
    for (std::size_t i = 0; i < xs.size(); ++i)
      want[i] = kernels::IntegerPow{y}(xs[i]);
    CHECK(lax::integer_pow(x, y).to_vector<float>() == want);
    // Under jit it is an instruction of a fused elementwise program, here of a temporary
    // register (which it may overwrite) as well as of an operand's.
    const Jitted f = jit([y](std::span<const Tree> a) {
      const Array& v = a[0].array();
      return std::vector<Tree>{Tree(lax::add(lax::integer_pow(v, y), v)),
                               Tree(lax::integer_pow(lax::mul(v, v), y))};
    });
    const std::vector<Tree> got = f(std::vector<Tree>{Tree(x)});
    std::vector<float> want_squared(xs.size());
    for (std::size_t i = 0; i < xs.size(); ++i) {
      want_squared[i] = kernels::IntegerPow{y}(kernels::Mul{}(xs[i], xs[i]));
      want[i] = kernels::Add{}(want[i], xs[i]);
    }
    CHECK(got[0].array().to_vector<float>() == want);
    CHECK(got[1].array().to_vector<float>() == want_squared);
  }
}

TEST_CASE(
    "eval: select_n picks per element with a bool or int32 selector, or whole with a 0-d one") {
  std::vector<Case> cases;
  for (const DType dt : {DType::f32, DType::f64, DType::i32, DType::u32}) {
    const Array c0 = make(dt, {3}, {1, 2, 3});
    const Array c1 = make(dt, {3}, {10, 20, 30});
    const Array c2 = make(dt, {3}, {100, 200, 300});
    const AVal out{{3}, dt};
    const Array pred = make(DType::bool_, {3}, {1, 0, 1});
    const Array which = make(DType::i32, {3}, {2, 0, 1});
    cases.push_back({name("bool selector", dt),
                     [=] {
                       return lax::select_n(pred, std::vector<Array>{c0, c1});
                     },
                     out,
                     {10, 2, 30}});
    cases.push_back({name("select(pred, on_true, on_false)", dt),
                     [=] { return lax::select(pred, c1, c0); },
                     out,
                     {10, 2, 30}});
    cases.push_back({name("int32 selector, 3 cases", dt),
                     [=] {
                       return lax::select_n(which, std::vector<Array>{c0, c1, c2});
                     },
                     out,
                     {100, 2, 30}});
    const Array t = make(DType::bool_, {}, {1});
    const Array two = make(DType::i32, {}, {2});
    cases.push_back({name("0-d bool selector", dt),
                     [=] {
                       return lax::select_n(t, std::vector<Array>{c0, c1});
                     },
                     out,
                     {10, 20, 30}});
    cases.push_back({name("0-d int32 selector", dt),
                     [=] {
                       return lax::select_n(two, std::vector<Array>{c0, c1, c2});
                     },
                     out,
                     {100, 200, 300}});
    const Array outside = make(DType::i32, {3}, {-1, 5, 1});
    cases.push_back({name("out-of-range int32 selector clamps like XLA", dt),
                     [=] {
                       return lax::select_n(outside, std::vector<Array>{c0, c1, c2});
                     },
                     out,
                     {1, 200, 30}});
  }
  const Array b0 = make(DType::bool_, {3}, {0, 0, 1});
  const Array b1 = make(DType::bool_, {3}, {1, 1, 0});
  const Array pred = make(DType::bool_, {3}, {1, 0, 1});
  cases.push_back({"bool cases",
                   [=] {
                     return lax::select_n(pred, std::vector<Array>{b0, b1});
                   },
                   {{3}, DType::bool_},
                   {1, 0, 0}});
  run_cases(cases);
}

TEST_CASE("eval: convert_element_type truncates, saturates and maps to bool like XLA") {
  const DType f32 = DType::f32, f64 = DType::f64, i32 = DType::i32, u32 = DType::u32,
              b = DType::bool_;
  const Array f = make(f32, {9}, {-1.7, -0.5, 0.5, 1.9, 3e9, -3e9, kNaN, kInf, -kInf});
  const Array fu = make(f32, {4}, {-1.5, 2.7, 5e9, kNaN});
  const Array fb = make(f32, {4}, {0, -0.0, 2.5, kNaN});
  const Array i = make(i32, {3}, {-1, 5, 0});
  const Array u = make(u32, {2}, {kU32Max, 7});
  const Array bools = make(b, {2}, {1, 0});
  const double tenth_f32 = static_cast<double>(0.1f);
  auto cvt = [](Array x, DType to) { return [=] { return lax::convert_element_type(x, to); }; };
  run_cases({
      {"f32 -> i32: truncate, saturate, NaN is 0",
       cvt(f, i32),
       {{9}, i32},
       {-1, 0, 0, 1, kI32Max, kI32Min, 0, kI32Max, kI32Min}},
      {"f32 -> u32: negatives and NaN are 0, saturate",
       cvt(fu, u32),
       {{4}, u32},
       {0, 2, kU32Max, 0}},
      {"f32 -> bool: nonzero (NaN too) is true", cvt(fb, b), {{4}, b}, {0, 0, 1, 1}},
      {"f64 -> i32 truncates toward zero",
       cvt(make(f64, {2}, {2.9, -2.9}), i32),
       {{2}, i32},
       {2, -2}},
      {"i32 -> u32 wraps", cvt(i, u32), {{3}, u32}, {kU32Max, 5, 0}},
      {"u32 -> i32 wraps", cvt(u, i32), {{2}, i32}, {-1, 7}},
      {"i32 -> f32 rounds to nearest",
       cvt(make(i32, {2}, {-3, 16777217}), f32),
       {{2}, f32},
       {-3, 16777216}},
      {"i32 -> bool", cvt(i, b), {{3}, b}, {1, 1, 0}},
      {"f64 -> f32 rounds", cvt(make(f64, {1}, {0.1}), f32), {{1}, f32}, {tenth_f32}},
      {"f32 -> f64 is exact", cvt(make(f32, {1}, {0.1}), f64), {{1}, f64}, {tenth_f32}},
      {"bool -> f32", cvt(bools, f32), {{2}, f32}, {1, 0}},
      {"bool -> f64", cvt(bools, f64), {{2}, f64}, {1, 0}},
      {"bool -> i32", cvt(bools, i32), {{2}, i32}, {1, 0}},
      {"bool -> u32", cvt(bools, u32), {{2}, u32}, {1, 0}},
      {"u32 -> f64", cvt(u, f64), {{2}, f64}, {kU32Max, 7}},
  });
}

TEST_CASE("eval: convert_element_type to and from bf16 and f16 rounds to nearest-even") {
  // Every backend converts them, the CPU too (a GPU's 16-bit results brought to the host).
  const DType f32 = DType::f32, bf16 = DType::bf16, f16 = DType::f16;
  const Array x = make(f32, {5}, {1.0, 0.1, -3.14159, 65504, 70000});
  const auto through = [](Array values, DType half, DType to) {
    return [=] { return lax::convert_element_type(lax::convert_element_type(values, half), to); };
  };
  run_cases({
      {"f32 -> bf16 -> f32",
       through(x, bf16, f32),
       {{5}, f32},
       {1.0, 0.10009765625, -3.140625, 65536, 70144}},
      {"f32 -> f16 -> f32: past 65504 is inf",
       through(x, f16, f32),
       {{5}, f32},
       {1.0, 0.0999755859375, -3.140625, 65504, kInf}},
      {"f32 -> bf16 -> i32 truncates", through(x, bf16, DType::i32), {{5}, DType::i32},
       {1, 0, -3, 65536, 70144}},
      {"f32 -> bf16 -> f64 is exact",
       through(x, bf16, DType::f64),
       {{5}, DType::f64},
       {1.0, 0.10009765625, -3.140625, 65536, 70144}},
  });
}
