// DType names/sizes and Shape validation.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

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

TEST_CASE("DType: 16-bit float bits round to nearest-even as JAX converts Python scalars") {
  // bfloat16 goes through float32 (ml_dtypes): 0.1 is 0x3DCCCCCD in float32, whose upper half
  // rounds up.
  CHECK(round_to_bfloat16_bits(0.1) == 0x3DCD);
  CHECK(round_to_bfloat16_bits(1.0) == 0x3F80);
  CHECK(round_to_bfloat16_bits(-2.0) == 0xC000);
  CHECK(round_to_bfloat16_bits(1.0 + 0x1p-8) == 0x3F80);      // a tie: to the even 1.0
  CHECK(round_to_bfloat16_bits(1.0 + 3 * 0x1p-8) == 0x3F82);  // a tie: up to even
  CHECK(round_to_bfloat16_bits(3.4e38) == 0x7F80);            // overflow: inf
  CHECK(round_to_bfloat16_bits(std::nan("")) == 0x7FC0);
  CHECK(round_to_bfloat16_bits(-0.0) == 0x8000);
  // float16 directly from the double (numpy).
  CHECK(round_to_float16_bits(0.1) == 0x2E66);
  CHECK(round_to_float16_bits(1.0) == 0x3C00);
  CHECK(round_to_float16_bits(-1.5) == 0xBE00);
  CHECK(round_to_float16_bits(65504.0) == 0x7BFF);
  CHECK(round_to_float16_bits(65519.0) == 0x7BFF);
  CHECK(round_to_float16_bits(65520.0) == 0x7C00);
  CHECK(round_to_float16_bits(0x1p-14) == 0x0400);            // smallest normal
  CHECK(round_to_float16_bits(0x1p-14 - 0x1p-25) == 0x0400);  // rounds up into it
  CHECK(round_to_float16_bits(0x1p-24) == 0x0001);            // smallest subnormal
  CHECK(round_to_float16_bits(0x1p-25) == 0x0000);            // a tie: to even 0
  CHECK(round_to_float16_bits(3 * 0x1p-26) == 0x0001);
  CHECK(round_to_float16_bits(2047.0 * 0x1p-11 + 0x1p-12) == 0x3C00);  // carries into 1.0
  CHECK(round_to_float16_bits(-std::numeric_limits<double>::infinity()) == 0xFC00);
  CHECK(round_to_float16_bits(std::nan("")) == 0x7E00);
  // Back, exactly: every finite bit pattern round-trips through its double.
  int bf16_misses = 0, f16_misses = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const double bf = bfloat16_bits_to_double(bits), h = float16_bits_to_double(bits);
    bf16_misses += !std::isnan(bf) && round_to_bfloat16_bits(bf) != bits;
    f16_misses += !std::isnan(h) && round_to_float16_bits(h) != bits;
  }
  CHECK(bf16_misses == 0);
  CHECK(f16_misses == 0);
  CHECK(bfloat16_bits_to_double(0x3DCD) == 0.10009765625);
  CHECK(float16_bits_to_double(0x2E66) == 0.0999755859375);
  CHECK(float16_bits_to_double(0x0001) == 0x1p-24);
  CHECK(std::isnan(float16_bits_to_double(0x7E00)));
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
