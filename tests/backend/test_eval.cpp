// Evaluation of every lax primitive on the default device: tables of cases (a lax call on small
// inputs and its hand-computed result) run eagerly in f32 and f64 and the integer and bool
// dtypes, then the errors of the shape rules and of the backends. ctest runs the suite on the
// CPU and again with FLAXPP_DEVICE=cuda, so both backends meet the same cases.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax.hpp"
#include "src/backend/cpu/cpu_eval.hpp"

using namespace flaxpp;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kI32Min = -2147483648.0;
constexpr double kI32Max = 2147483647.0;
constexpr double kU32Max = 4294967295.0;
const DType kFloats[] = {DType::f32, DType::f64};

// An array of `dtype` holding `values` (bool: value != 0).
Array make(DType dtype, Shape shape, const std::vector<double>& values) {
  return visit_host_dtype(dtype, "make", [&]<class T>(TypeTag<T>) {
    std::vector<T> data;
    for (const double v : values)
      data.push_back(std::is_same_v<T, std::uint8_t> ? T(v != 0) : static_cast<T>(v));
    REQUIRE(static_cast<std::int64_t>(data.size()) == shape.size());
    return Array::from_host_bytes(data.data(), std::move(shape), dtype, default_device());
  });
}

// 0, 1, 2, ... in `dtype`.
Array iota(DType dtype, Shape shape) {
  std::vector<double> values(static_cast<std::size_t>(shape.size()));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<double>(i);
  return make(dtype, std::move(shape), values);
}

std::vector<double> values_of(const Array& a) {
  const Array host = a.to(Device::cpu());
  return visit_host_dtype(a.dtype(), "values_of", [&]<class T>(TypeTag<T>) {
    const T* data = static_cast<const T*>(host.buffer().data());
    return std::vector<double>(data, data + a.size());
  });
}

std::string str(const std::vector<double>& v) {
  std::ostringstream os;
  os.precision(17);
  os << "{";
  for (std::size_t i = 0; i < v.size(); ++i)
    os << (i ? ", " : "") << v[i];
  return os.str() + "}";
}

// Floats within a few ulp of the exact value (transcendental functions round differently
// across math libraries); integers and bools exactly; NaN only matches NaN.
bool close(double got, double want, DType dtype) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want) || !is_floating(dtype)) return got == want;
  const double tol = dtype == DType::f32 ? 1e-6 : 1e-14;
  return std::abs(got - want) <= tol * (std::abs(want) + 0.1);
}

// One row of a table: a lax call and what it must return.
struct Case {
  // A constructor rather than aggregate initialisation: g++ 12 reports a false
  // -Wmaybe-uninitialized for the aggregate form with a braced AVal.
  Case(std::string n, std::function<Array()> f, AVal aval, std::vector<double> values)
      : name(std::move(n)),
        run(std::move(f)),
        want_aval(std::move(aval)),
        want(std::move(values)) {}
  std::string name;
  std::function<Array()> run;
  AVal want_aval;
  std::vector<double> want;
};

void run_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    INFO(c.name);
    Array got;
    try {
      got = c.run();
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << e.what());
      continue;
    }
    CHECK(got.aval() == c.want_aval);
    const std::vector<double> values = values_of(got);
    bool ok = values.size() == c.want.size();
    for (std::size_t i = 0; ok && i < values.size(); ++i)
      ok = close(values[i], c.want[i], got.dtype());
    CHECK_MESSAGE(ok, "got " << str(values) << ", want " << str(c.want));
  }
}

std::string name(const char* what, DType dtype) {
  return detail::str(what, " ", dtype_short_name(dtype));
}

ir::DotDimensionNumbers dims(std::vector<std::int64_t> lhs_contracting,
                             std::vector<std::int64_t> rhs_contracting,
                             std::vector<std::int64_t> lhs_batch = {},
                             std::vector<std::int64_t> rhs_batch = {}) {
  return {std::move(lhs_contracting), std::move(rhs_contracting), std::move(lhs_batch),
          std::move(rhs_batch)};
}

}  // namespace

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

TEST_CASE("eval: reduce_sum and reduce_max over no, one, several and all axes") {
  std::vector<Case> cases;
  for (const DType dt : {DType::f32, DType::f64, DType::i32, DType::u32}) {
    const Array x = iota(dt, {2, 3, 4});  // x[a, j, k] = 12a + 4j + k
    std::vector<double> all(24);
    for (std::size_t i = 0; i < 24; ++i)
      all[i] = static_cast<double>(i);
    cases.push_back(
        {name("sum over ()", dt), [=] { return lax::reduce_sum(x, {}); }, {{2, 3, 4}, dt}, all});
    cases.push_back({name("sum over (0)", dt),
                     [=] { return lax::reduce_sum(x, {0}); },
                     {{3, 4}, dt},
                     {12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34}});
    cases.push_back({name("sum over (1)", dt),
                     [=] { return lax::reduce_sum(x, {1}); },
                     {{2, 4}, dt},
                     {12, 15, 18, 21, 48, 51, 54, 57}});
    cases.push_back({name("sum over (2)", dt),
                     [=] { return lax::reduce_sum(x, {2}); },
                     {{2, 3}, dt},
                     {6, 22, 38, 54, 70, 86}});
    cases.push_back({name("sum over (0, 2)", dt),
                     [=] {
                       return lax::reduce_sum(x, {0, 2});
                     },
                     {{3}, dt},
                     {60, 92, 124}});
    cases.push_back({name("sum over (1, 2)", dt),
                     [=] {
                       return lax::reduce_sum(x, {1, 2});
                     },
                     {{2}, dt},
                     {66, 210}});
    cases.push_back({name("sum over all", dt),
                     [=] {
                       return lax::reduce_sum(x, {0, 1, 2});
                     },
                     {{}, dt},
                     {276}});
    cases.push_back(
        {name("max over ()", dt), [=] { return lax::reduce_max(x, {}); }, {{2, 3, 4}, dt}, all});
    cases.push_back({name("max over (1)", dt),
                     [=] { return lax::reduce_max(x, {1}); },
                     {{2, 4}, dt},
                     {8, 9, 10, 11, 20, 21, 22, 23}});
    cases.push_back({name("max over (0, 2)", dt),
                     [=] {
                       return lax::reduce_max(x, {0, 2});
                     },
                     {{3}, dt},
                     {15, 19, 23}});
    cases.push_back({name("max over all", dt),
                     [=] {
                       return lax::reduce_max(x, {0, 1, 2});
                     },
                     {{}, dt},
                     {23}});

    const Array ones_dim = make(dt, {2, 1, 3}, {1, 2, 3, 4, 5, 6});
    cases.push_back({name("sum over a size-1 axis", dt),
                     [=] { return lax::reduce_sum(ones_dim, {1}); },
                     {{2, 3}, dt},
                     {1, 2, 3, 4, 5, 6}});
    cases.push_back({name("sum over (0, 1) with a size-1 axis", dt),
                     [=] {
                       return lax::reduce_sum(ones_dim, {0, 1});
                     },
                     {{3}, dt},
                     {5, 7, 9}});

    // Rows of 20 elements: the 8-lane accumulation plus a tail.
    const Array rows = iota(dt, {2, 20});
    cases.push_back({name("sum of 20-element rows", dt),
                     [=] { return lax::reduce_sum(rows, {1}); },
                     {{2}, dt},
                     {190, 590}});
    std::vector<double> spike(20, 1);
    spike[5] = 100;
    const Array peaked = make(dt, {20}, spike);
    cases.push_back({name("max of a 20-element row", dt),
                     [=] { return lax::reduce_max(peaked, {0}); },
                     {{}, dt},
                     {100}});

    const Array empty = make(dt, {2, 0}, {});
    const double lowest = dt == DType::i32 ? kI32Min : dt == DType::u32 ? 0 : -kInf;
    cases.push_back({name("max over an empty axis is the identity", dt),
                     [=] { return lax::reduce_max(empty, {1}); },
                     {{2}, dt},
                     {lowest, lowest}});
    cases.push_back({name("sum over an empty axis is 0", dt),
                     [=] { return lax::reduce_sum(empty, {1}); },
                     {{2}, dt},
                     {0, 0}});
    cases.push_back({name("sum keeping an empty axis is empty", dt),
                     [=] { return lax::reduce_sum(empty, {0}); },
                     {{0}, dt},
                     {}});
  }
  for (const DType dt : kFloats) {
    const Array x = make(dt, {3}, {1, kNaN, 3});
    cases.push_back({name("max propagates NaN", dt),
                     [=] { return lax::reduce_max(x, {0}); },
                     {{}, dt},
                     {kNaN}});
    cases.push_back({name("sum propagates NaN", dt),
                     [=] { return lax::reduce_sum(x, {0}); },
                     {{}, dt},
                     {kNaN}});
  }
  run_cases(cases);
}

TEST_CASE("eval: broadcast_in_dim repeats new axes and size-1 axes") {
  std::vector<Case> cases;
  for (const DType dt : {DType::f32, DType::f64, DType::i32, DType::u32}) {
    const AVal out{{2, 3}, dt};
    const Array s = make(dt, {}, {7});
    const Array row = make(dt, {3}, {1, 2, 3});
    const Array col = make(dt, {2}, {1, 2});
    const Array row1 = make(dt, {1, 3}, {1, 2, 3});
    const Array col1 = make(dt, {2, 1}, {1, 2});
    const Array full = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
    cases.push_back({name("0-d to (2, 3)", dt),
                     [=] {
                       return lax::broadcast_in_dim(s, {2, 3}, {});
                     },
                     out,
                     {7, 7, 7, 7, 7, 7}});
    cases.push_back({name("(3) to (2, 3) along axis 1", dt),
                     [=] {
                       return lax::broadcast_in_dim(row, {2, 3}, {1});
                     },
                     out,
                     {1, 2, 3, 1, 2, 3}});
    cases.push_back({name("(2) to (2, 3) along axis 0", dt),
                     [=] {
                       return lax::broadcast_in_dim(col, {2, 3}, {0});
                     },
                     out,
                     {1, 1, 1, 2, 2, 2}});
    cases.push_back({name("(1, 3) to (2, 3) expands the size-1 axis", dt),
                     [=] {
                       return lax::broadcast_in_dim(row1, {2, 3}, {0, 1});
                     },
                     out,
                     {1, 2, 3, 1, 2, 3}});
    cases.push_back({name("(2, 1) to (2, 3, 2): a new middle axis and a size-1 axis", dt),
                     [=] {
                       return lax::broadcast_in_dim(col1, {2, 3, 2}, {0, 2});
                     },
                     {{2, 3, 2}, dt},
                     {1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2}});
    cases.push_back({name("(2, 3) to (2, 3) copies", dt),
                     [=] {
                       return lax::broadcast_in_dim(full, {2, 3}, {0, 1});
                     },
                     out,
                     {1, 2, 3, 4, 5, 6}});
    cases.push_back({name("(2, 3) to (2, 2, 3) along axes (1, 2)", dt),
                     [=] {
                       return lax::broadcast_in_dim(full, {2, 2, 3}, {1, 2});
                     },
                     {{2, 2, 3}, dt},
                     {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}});
    cases.push_back({name("(1) to (0, 2): nothing to write", dt),
                     [=] {
                       return lax::broadcast_in_dim(make(dt, {1}, {5}), {0, 2}, {1});
                     },
                     {{0, 2}, dt},
                     {}});
  }
  const Array b = make(DType::bool_, {2}, {1, 0});
  cases.push_back({"bool (2) to (2, 3)",
                   [=] {
                     return lax::broadcast_in_dim(b, {2, 3}, {0});
                   },
                   {{2, 3}, DType::bool_},
                   {1, 1, 1, 0, 0, 0}});
  run_cases(cases);
}

TEST_CASE("eval: reshape keeps row-major order") {
  std::vector<Case> cases;
  for (const DType dt : {DType::f32, DType::f64, DType::i32, DType::u32}) {
    const Array x = iota(dt, {2, 3});
    cases.push_back({name("(2, 3) to (3, 2)", dt),
                     [=] {
                       return lax::reshape(x, {3, 2});
                     },
                     {{3, 2}, dt},
                     {0, 1, 2, 3, 4, 5}});
    cases.push_back({name("(2, 3) to (1, 6, 1)", dt),
                     [=] {
                       return lax::reshape(x, {1, 6, 1});
                     },
                     {{1, 6, 1}, dt},
                     {0, 1, 2, 3, 4, 5}});
    cases.push_back({name("(1) to ()", dt),
                     [=] { return lax::reshape(make(dt, {1}, {4}), {}); },
                     {{}, dt},
                     {4}});
  }
  const Array b = make(DType::bool_, {4}, {1, 0, 0, 1});
  cases.push_back({"bool (4) to (2, 2)",
                   [=] {
                     return lax::reshape(b, {2, 2});
                   },
                   {{2, 2}, DType::bool_},
                   {1, 0, 0, 1}});
  run_cases(cases);
}

TEST_CASE("eval: transpose applies any permutation, 2-D tiles included") {
  std::vector<Case> cases;
  for (const DType dt : {DType::f32, DType::f64, DType::i32, DType::u32}) {
    cases.push_back({name("(2, 3) by (1, 0)", dt),
                     [=] {
                       return lax::transpose(iota(dt, {2, 3}), {1, 0});
                     },
                     {{3, 2}, dt},
                     {0, 3, 1, 4, 2, 5}});
    // x[a, j, k] = 12a + 4j + k; result axis i walks operand axis perm[i].
    const Array x = iota(dt, {2, 3, 4});
    const std::vector<std::vector<std::int64_t>> perms = {{2, 0, 1}, {1, 0, 2}, {0, 2, 1},
                                                          {2, 1, 0}, {1, 2, 0}, {0, 1, 2}};
    for (const auto& perm : perms) {
      const std::int64_t in_dims[] = {2, 3, 4};
      const std::int64_t in_strides[] = {12, 4, 1};
      const std::vector<std::int64_t> out_dims = {in_dims[perm[0]], in_dims[perm[1]],
                                                  in_dims[perm[2]]};
      std::vector<double> want;
      for (std::int64_t i0 = 0; i0 < out_dims[0]; ++i0)
        for (std::int64_t i1 = 0; i1 < out_dims[1]; ++i1)
          for (std::int64_t i2 = 0; i2 < out_dims[2]; ++i2)
            want.push_back(static_cast<double>(i0 * in_strides[perm[0]] + i1 * in_strides[perm[1]] +
                                               i2 * in_strides[perm[2]]));
      cases.push_back(
          {detail::str(name("(2, 3, 4) by", dt), " (", perm[0], ", ", perm[1], ", ", perm[2], ")"),
           [=] { return lax::transpose(x, perm); },
           {Shape(out_dims), dt},
           want});
    }
    // (37, 70): several 32x32 tiles with ragged edges.
    const Array m = iota(dt, {37, 70});
    std::vector<double> want;
    for (std::int64_t c = 0; c < 70; ++c)
      for (std::int64_t r = 0; r < 37; ++r)
        want.push_back(static_cast<double>(r * 70 + c));
    cases.push_back({name("(37, 70) by (1, 0)", dt),
                     [=] {
                       return lax::transpose(m, {1, 0});
                     },
                     {{70, 37}, dt},
                     want});
  }
  const Array b = make(DType::bool_, {2, 2}, {1, 1, 0, 0});
  cases.push_back({"bool (2, 2) by (1, 0)",
                   [=] {
                     return lax::transpose(b, {1, 0});
                   },
                   {{2, 2}, DType::bool_},
                   {1, 0, 1, 0}});
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

TEST_CASE("eval: dot_general contracts any dimensions, with batch dims anywhere") {
  std::vector<Case> cases;
  for (const DType dt : kFloats) {
    // A = [[1, 2, 3], [4, 5, 6]], B = [[7, 8], [9, 10], [11, 12]], A B = [[58, 64], [139, 154]].
    const Array a = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
    const Array at = make(dt, {3, 2}, {1, 4, 2, 5, 3, 6});
    const Array bm = make(dt, {3, 2}, {7, 8, 9, 10, 11, 12});
    const Array bt = make(dt, {2, 3}, {7, 9, 11, 8, 10, 12});
    const AVal out{{2, 2}, dt};
    const std::vector<double> ab = {58, 64, 139, 154};
    cases.push_back({name("matmul (2, 3) x (3, 2)", dt),
                     [=] { return lax::dot_general(a, bm, dims({1}, {0})); }, out, ab});
    cases.push_back({name("contracting dim 0 of both", dt),
                     [=] { return lax::dot_general(at, bm, dims({0}, {0})); }, out, ab});
    cases.push_back({name("contracting dim 1 of both", dt),
                     [=] { return lax::dot_general(a, bt, dims({1}, {1})); }, out, ab});
    cases.push_back({name("contracting lhs dim 0, rhs dim 1", dt),
                     [=] { return lax::dot_general(at, bt, dims({0}, {1})); }, out, ab});
    cases.push_back({name("preferred_element_type equal to the inputs'", dt),
                     [=] { return lax::dot_general(a, bm, dims({1}, {0}), dt); }, out, ab});

    const Array v3 = make(dt, {3}, {1, 1, 2});
    const Array v2 = make(dt, {2}, {1, 2});
    cases.push_back({name("matrix-vector", dt),
                     [=] { return lax::dot_general(a, v3, dims({1}, {0})); },
                     {{2}, dt},
                     {9, 21}});
    cases.push_back({name("vector-matrix", dt),
                     [=] { return lax::dot_general(v2, a, dims({0}, {0})); },
                     {{3}, dt},
                     {9, 12, 15}});
    cases.push_back({name("vector-vector to 0-d", dt),
                     [=] {
                       return lax::dot_general(v3, make(dt, {3}, {4, 5, 6}), dims({0}, {0}));
                     },
                     {{}, dt},
                     {21}});
    cases.push_back({name("outer product (no contracting dims)", dt),
                     [=] {
                       return lax::dot_general(v2, make(dt, {3}, {3, 4, 5}), dims({}, {}));
                     },
                     {{2, 3}, dt},
                     {3, 4, 5, 6, 8, 10}});

    // Batch element b is ((b + 1) A) B.
    const std::vector<double> batched = {58, 64, 139, 154, 116, 128, 278, 308};
    const AVal bout{{2, 2, 2}, dt};
    const Array la = make(dt, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 2, 4, 6, 8, 10, 12});       // (b, i, k)
    const Array rb = make(dt, {2, 3, 2}, {7, 8, 9, 10, 11, 12, 7, 8, 9, 10, 11, 12});   // (b, k, j)
    const Array rbt = make(dt, {2, 2, 3}, {7, 9, 11, 8, 10, 12, 7, 9, 11, 8, 10, 12});  // (b, j, k)
    const Array la_mid = make(dt, {2, 2, 3}, {1, 2, 3, 2, 4, 6, 4, 5, 6, 8, 10, 12});   // (i, b, k)
    const Array rb_last =
        make(dt, {3, 2, 2}, {7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12});  // (k, j, b)
    cases.push_back({name("batched matmul, batch dims first", dt),
                     [=] { return lax::dot_general(la, rb, dims({2}, {1}, {0}, {0})); }, bout,
                     batched});
    cases.push_back({name("batched matmul, rhs contracting its last dim", dt),
                     [=] { return lax::dot_general(la, rbt, dims({2}, {2}, {0}, {0})); }, bout,
                     batched});
    cases.push_back({name("batched matmul, batch dims in the middle and last", dt),
                     [=] { return lax::dot_general(la_mid, rb_last, dims({2}, {0}, {1}, {2})); },
                     bout, batched});

    // out[i] = sum_jk L[i, j, k] R[j, k] with L = iota (2, 3, 2), R = 1 + iota (3, 2).
    const Array l3 = iota(dt, {2, 3, 2});
    const Array r2 = make(dt, {3, 2}, {1, 2, 3, 4, 5, 6});
    cases.push_back({name("two contracting dims", dt),
                     [=] {
                       return lax::dot_general(l3, r2, dims({1, 2}, {0, 1}));
                     },
                     {{2}, dt},
                     {70, 196}});
    cases.push_back({name("two contracting dims listed in reverse", dt),
                     [=] {
                       return lax::dot_general(l3, r2, dims({2, 1}, {1, 0}));
                     },
                     {{2}, dt},
                     {70, 196}});

    cases.push_back(
        {name("contracting a size-0 dim gives zeros", dt),
         [=] {
           return lax::dot_general(make(dt, {2, 0}, {}), make(dt, {0, 3}, {}), dims({1}, {0}));
         },
         {{2, 3}, dt},
         {0, 0, 0, 0, 0, 0}});
    cases.push_back({name("a size-0 free dim gives an empty result", dt),
                     [=] {
                       return lax::dot_general(make(dt, {0, 3}, {}), bm, dims({1}, {0}));
                     },
                     {{0, 2}, dt},
                     {}});
    cases.push_back({name("a size-0 batch dim gives an empty result", dt),
                     [=] {
                       return lax::dot_general(make(dt, {0, 2, 3}, {}), make(dt, {0, 3, 2}, {}),
                                               dims({2}, {1}, {0}, {0}));
                     },
                     {{0, 2, 2}, dt},
                     {}});
  }
  run_cases(cases);
}

TEST_CASE("eval: layer_norm and its cotangents match Flax's formula composed from primitives") {
  for (const DType dt : kFloats) {
    INFO(dtype_name(dt));
    const Array x = make(dt, {2, 4}, {0.5, -1, 2, 3.5, -0.25, 0.75, 1, -2});
    const Array scale = make(dt, {4}, {1, 0.5, -2, 1.5});
    const Array bias = make(dt, {4}, {0.1, 0, -0.3, 2});
    const Array dy = make(dt, {2, 4}, {1, -1, 0.5, 2, -0.5, 0.25, 3, 1});
    const double eps = 1e-5;
    // The reference: mean, fast variance, rsqrt, as flax.linen.LayerNorm composes them.
    const auto n = lax::scalar(4, dt);
    const Array mean = lax::div(lax::reduce_sum(x, {1}), n);
    const Array mean2 = lax::div(lax::reduce_sum(lax::mul(x, x), {1}), n);
    const Array var = lax::sub(mean2, lax::mul(mean, mean));
    const Array r = lax::rsqrt(lax::add(var, lax::scalar(eps, dt)));
    auto rows = [](const Array& v) { return lax::broadcast_in_dim(v, Shape{2, 4}, {0}); };
    auto cols = [](const Array& v) { return lax::broadcast_in_dim(v, Shape{2, 4}, {1}); };
    const Array xhat = lax::mul(lax::sub(x, rows(mean)), rows(r));
    const Array y =
        lax::add(lax::mul(lax::sub(x, rows(mean)), lax::mul(rows(r), cols(scale))), cols(bias));
    const Array g = lax::mul(dy, cols(scale));
    const Array mean_g = lax::div(lax::reduce_sum(g, {1}), n);
    const Array mean_gx = lax::div(lax::reduce_sum(lax::mul(g, xhat), {1}), n);
    const Array dx =
        lax::mul(rows(r), lax::sub(lax::sub(g, rows(mean_g)), lax::mul(xhat, rows(mean_gx))));
    const Array dscale = lax::reduce_sum(lax::mul(dy, xhat), {0});
    run_cases({{name("layer_norm", dt),
                [=] { return lax::layer_norm(x, scale, bias, eps); },
                {{2, 4}, dt},
                values_of(y)},
               {name("layer_norm_dx", dt),
                [=] { return lax::layer_norm_dx(x, scale, dy, eps); },
                {{2, 4}, dt},
                values_of(dx)},
               {name("layer_norm_dscale", dt),
                [=] { return lax::layer_norm_dscale(x, dy, eps); },
                {{4}, dt},
                values_of(dscale)}});
  }
  const Array x = make(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK_THROWS_WITH_AS(lax::layer_norm(x, x, x, 1e-6), doctest::Contains("must be f32[3]"),
                       ValueError);
}

TEST_CASE("eval: stop_gradient and checkpoint_name return their input's buffer") {
  const Array x = make(DType::f32, {3}, {1, 2, 3});
  const Array s = lax::stop_gradient(x);
  const Array n = lax::checkpoint_name(x, "h");
  CHECK(&s.buffer() == &x.buffer());
  CHECK(&n.buffer() == &x.buffer());
  CHECK(n.to_vector<float>() == std::vector<float>{1, 2, 3});
}

TEST_CASE("eval: shape rules reject mismatched dtypes and shapes with ValueError") {
  const Array x = make(DType::f32, {2}, {1, 2});
  const Array xd = make(DType::f64, {2}, {1, 2});
  const Array x3 = make(DType::f32, {3}, {1, 2, 3});
  const Array m = make(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK_THROWS_AS(lax::add(x, xd), ValueError);
  CHECK_THROWS_AS(lax::add(x, x3), ValueError);
  CHECK_THROWS_AS(lax::lt(x, xd), ValueError);
  CHECK_THROWS_AS(lax::dot_general(m, m, dims({1}, {0})), ValueError);
  CHECK_THROWS_AS(lax::dot_general(m, make(DType::f64, {3}, {1, 2, 3}), dims({1}, {0})),
                  ValueError);
  CHECK_THROWS_AS(lax::select_n(make(DType::bool_, {2}, {1, 0}), std::vector<Array>{x, xd}),
                  ValueError);
  CHECK_THROWS_AS(lax::exp(make(DType::i32, {1}, {1})), ValueError);
  CHECK_THROWS_AS(lax::reshape(x3, {2, 2}), ValueError);
  CHECK_THROWS_AS(lax::broadcast_in_dim(x3, {2, 2}, {1}), ValueError);
}

TEST_CASE("eval: a dtype the backend does not implement is a ValueError naming both") {
  const Array p = make(DType::bool_, {2}, {1, 0});
  const Array mi = make(DType::i32, {2, 2}, {1, 2, 3, 4});
  const Array m = make(DType::f32, {2, 2}, {1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(lax::add(p, p), doctest::Contains("add"), ValueError);
  CHECK_THROWS_WITH_AS(lax::add(p, p), doctest::Contains("bool"), ValueError);
  // Integer dots are refused by dot_general's shape rule already, while tracing.
  CHECK_THROWS_WITH_AS(lax::dot_general(mi, mi, dims({1}, {0})),
                       doctest::Contains("operands must be floating point"), ValueError);
  if (default_device() == Device::cpu())  // the CUDA backend stores bf16
    CHECK_THROWS_WITH_AS(lax::convert_element_type(m, DType::bf16), doctest::Contains("bfloat16"),
                         ValueError);
  CHECK_THROWS_WITH_AS(lax::dot_general(m, m, dims({1}, {0}), DType::f64),
                       doctest::Contains("preferred_element_type"), ValueError);
}

TEST_CASE("eval: a primitive the CPU backend does not know is a ValueError naming it") {
  const ir::Primitive made_up("made_up", [](std::span<const AVal> in, const ir::Params&) {
    return std::vector<AVal>(in.begin(), in.end());
  });
  const Array x = make(DType::f32, {1}, {1});
  const Array in[] = {x};
  const AVal out[] = {x.aval()};
  CHECK_THROWS_WITH_AS(cpu::eval(made_up, in, {}, out), doctest::Contains("made_up"), ValueError);
  CHECK_THROWS_WITH_AS(ir::eval_primitive(made_up, in, {}), doctest::Contains("made_up"),
                       ValueError);
}
