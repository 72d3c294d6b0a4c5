// DType names/sizes and Shape validation.
#include <doctest/doctest.h>

#include "flaxpp/core/dtype.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/core/shape.hpp"

using namespace flaxpp;

TEST_CASE("DType: every dtype has its numpy name, jaxpr short name and size") {
  struct Row {
    DType dtype;
    const char* name;
    const char* short_name;
    std::size_t size;
  };
  for (const Row& r : {Row{DType::f32, "float32", "f32", 4}, Row{DType::f64, "float64", "f64", 8},
                       Row{DType::bf16, "bfloat16", "bf16", 2},
                       Row{DType::f16, "float16", "f16", 2}, Row{DType::i32, "int32", "i32", 4},
                       Row{DType::u32, "uint32", "u32", 4}, Row{DType::bool_, "bool", "bool", 1}}) {
    CHECK(dtype_name(r.dtype) == r.name);
    CHECK(dtype_short_name(r.dtype) == r.short_name);
    CHECK(itemsize(r.dtype) == r.size);
    CHECK(dtype_from_name(r.name) == r.dtype);
  }
  CHECK(is_floating(DType::bf16));
  CHECK_FALSE(is_floating(DType::i32));
  CHECK(is_integer(DType::u32));
  CHECK_FALSE(is_integer(DType::bool_));
}

TEST_CASE("DType: an unknown name is an error that lists the accepted names") {
  CHECK_THROWS_WITH_AS(dtype_from_name("float8"), doctest::Contains("expected one of float32"),
                       ValueError);
}

TEST_CASE("Shape: a scalar has rank 0 and one element; size is the product of dims") {
  CHECK(Shape{}.rank() == 0);
  CHECK(Shape{}.size() == 1);
  CHECK(Shape{}.str() == "[]");
  const Shape s{5, 4, 3};
  CHECK(s.rank() == 3);
  CHECK(s.size() == 60);
  CHECK(s.str() == "[5,4,3]");
  CHECK(Shape{2, 0, 7}.size() == 0);
}

TEST_CASE("Shape: negative axes count from the end; out of range is a clear error") {
  const Shape s{5, 4};
  CHECK(s[-1] == 4);
  CHECK(s[-2] == 5);
  CHECK(s.normalize_axis(1) == 1);
  CHECK_THROWS_WITH_AS(s.normalize_axis(2), doctest::Contains("out of range for shape [5,4]"),
                       ValueError);
  CHECK_THROWS_AS(s.normalize_axis(-3), ValueError);
}

TEST_CASE("Shape: negative dimensions and overflowing sizes are rejected") {
  CHECK_THROWS_WITH_AS(Shape({3, -1}), doctest::Contains("must be >= 0"), ValueError);
  CHECK_THROWS_WITH_AS(Shape({1ll << 40, 1ll << 40}), doctest::Contains("overflows"), ValueError);
}
