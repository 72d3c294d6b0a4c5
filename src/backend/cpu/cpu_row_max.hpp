// Private to the CPU backend: the float32 maximum along the last axes (a softmax's first
// pass), vectorised and compiled for AVX-512, for AVX2 and for any x86-64 (cpu_clones.hpp).
#pragma once

#include <cstdint>

namespace flaxpp::cpu {

// y[r] = the maximum of x[r*n .. r*n + n), as kernels::Max folds it: -inf for an empty row,
// +0 over -0, and a NaN where the row has one (the row's first NaN; a fold of kernels::Max
// gives a NaN too, of a payload that depends on the order).
void max_rows_f32(const float* x, std::int64_t rows, std::int64_t n, float* y);

}  // namespace flaxpp::cpu
