// flaxpp/core/precision.hpp — the default precision of matrix products, like JAX's
// `jax_default_matmul_precision`. float32 (JAX's "highest") is the default everywhere, so GPU
// results match the CPU and JAX-CPU references; tensorfloat32 (JAX's "high") lets cuBLAS
// use TF32 tensor cores for float32 products, ~10 mantissa bits per product. The CPU backend
// always computes in full float32. bf16/f16 operands always accumulate in float32.
#pragma once

#include <string_view>

namespace flaxpp {

enum class MatmulPrecision { float32, tensorfloat32 };

// "float32" or "tensorfloat32", the names JAX's flag takes.
std::string_view matmul_precision_name(MatmulPrecision precision);
// Parses JAX's names: "float32"/"highest" and "tensorfloat32"/"high". Throws ValueError
// naming the accepted ones for anything else.
MatmulPrecision matmul_precision_from_name(std::string_view name);

// FLAXPP_MATMUL_PRECISION when set (read once), else float32; set_default_matmul_precision()
// overrides it for the whole process.
MatmulPrecision default_matmul_precision();
void set_default_matmul_precision(MatmulPrecision precision);

}  // namespace flaxpp
