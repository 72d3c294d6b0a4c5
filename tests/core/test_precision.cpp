// The default matmul precision: JAX's names parse, anything else is a clear error, and the
// setting round-trips.
#include <doctest/doctest.h>

#include "flaxpp/core/error.hpp"
#include "flaxpp/core/precision.hpp"

using namespace flaxpp;

TEST_CASE("matmul precision: JAX's names parse; float32 is the default") {
  CHECK(matmul_precision_from_name("float32") == MatmulPrecision::float32);
  CHECK(matmul_precision_from_name("highest") == MatmulPrecision::float32);
  CHECK(matmul_precision_from_name("tensorfloat32") == MatmulPrecision::tensorfloat32);
  CHECK(matmul_precision_from_name("high") == MatmulPrecision::tensorfloat32);
  CHECK(matmul_precision_name(MatmulPrecision::tensorfloat32) == "tensorfloat32");
  CHECK_THROWS_WITH_AS(matmul_precision_from_name("bfloat16"),
                       doctest::Contains("expected float32 (or highest) or tensorfloat32"),
                       ValueError);
  CHECK(default_matmul_precision() == MatmulPrecision::float32);
  set_default_matmul_precision(MatmulPrecision::tensorfloat32);
  CHECK(default_matmul_precision() == MatmulPrecision::tensorfloat32);
  set_default_matmul_precision(MatmulPrecision::float32);
}
