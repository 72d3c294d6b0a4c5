// The default matmul precision (flaxpp/core/precision.hpp).
#include "flaxpp/core/precision.hpp"

#include <atomic>
#include <cstdlib>

#include "flaxpp/core/error.hpp"

namespace flaxpp {

std::string_view matmul_precision_name(MatmulPrecision precision) {
  return precision == MatmulPrecision::float32 ? "float32" : "tensorfloat32";
}

MatmulPrecision matmul_precision_from_name(std::string_view name) {
  if (name == "float32" || name == "highest") return MatmulPrecision::float32;
  if (name == "tensorfloat32" || name == "high") return MatmulPrecision::tensorfloat32;
  throw ValueError(detail::str("unknown matmul precision \"", name,
                               "\"; expected float32 (or highest) or tensorfloat32 (or high)"));
}

namespace {

MatmulPrecision initial_precision() {
  const char* env = std::getenv("FLAXPP_MATMUL_PRECISION");
  return env != nullptr && *env != '\0' ? matmul_precision_from_name(env)
                                        : MatmulPrecision::float32;
}

std::atomic<MatmulPrecision>& current() {
  static std::atomic<MatmulPrecision> precision{initial_precision()};
  return precision;
}

}  // namespace

MatmulPrecision default_matmul_precision() {
  return current().load();
}

void set_default_matmul_precision(MatmulPrecision precision) {
  current().store(precision);
}

}  // namespace flaxpp
