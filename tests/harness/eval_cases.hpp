// What the lax evaluation tests (tests/backend/test_eval_*.cpp) share: arrays made from lists
// of doubles in any dtype and read back as doubles, and tables of cases (a lax call on small
// inputs and its hand-computed result) run and compared within a few ulp.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/params.hpp"

namespace flaxpp::testing {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kI32Min = -2147483648.0;
inline constexpr double kI32Max = 2147483647.0;
inline constexpr double kU32Max = 4294967295.0;
inline constexpr DType kFloats[] = {DType::f32, DType::f64};

// An array of `dtype` holding `values` (bool: value != 0).
inline Array make(DType dtype, Shape shape, const std::vector<double>& values) {
  return visit_host_dtype(dtype, "make", [&]<class T>(TypeTag<T>) {
    std::vector<T> data;
    for (const double v : values)
      data.push_back(std::is_same_v<T, std::uint8_t> ? T(v != 0) : static_cast<T>(v));
    REQUIRE(static_cast<std::int64_t>(data.size()) == shape.size());
    return Array::from_host_bytes(data.data(), std::move(shape), dtype, default_device());
  });
}

// 0, 1, 2, ... in `dtype`.
inline Array iota(DType dtype, Shape shape) {
  std::vector<double> values(static_cast<std::size_t>(shape.size()));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<double>(i);
  return make(dtype, std::move(shape), values);
}

inline std::vector<double> values_of(const Array& a) {
  const Array host = a.to(Device::cpu());
  return visit_host_dtype(a.dtype(), "values_of", [&]<class T>(TypeTag<T>) {
    const T* data = static_cast<const T*>(host.buffer().data());
    return std::vector<double>(data, data + a.size());
  });
}

inline std::string str(const std::vector<double>& v) {
  std::ostringstream os;
  os.precision(17);
  os << "{";
  for (std::size_t i = 0; i < v.size(); ++i)
    os << (i ? ", " : "") << v[i];
  return os.str() + "}";
}

// Floats within a few ulp of the exact value (transcendental functions round differently
// across math libraries); integers and bools exactly; NaN only matches NaN.
inline bool close(double got, double want, DType dtype) {
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

inline void run_cases(const std::vector<Case>& cases) {
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

inline std::string name(const char* what, DType dtype) {
  return detail::str(what, " ", dtype_short_name(dtype));
}

inline ir::DotDimensionNumbers dims(std::vector<std::int64_t> lhs_contracting,
                                    std::vector<std::int64_t> rhs_contracting,
                                    std::vector<std::int64_t> lhs_batch = {},
                                    std::vector<std::int64_t> rhs_batch = {}) {
  return {std::move(lhs_contracting), std::move(rhs_contracting), std::move(lhs_batch),
          std::move(rhs_batch)};
}

}  // namespace flaxpp::testing
