// The CPU's float32 tanh, exp and integer_pow over arrays: loops of their own, vectorised and
// compiled for AVX-512, for AVX2 with FMA and for any x86-64 where the compiler can
// (cpu_clones.hpp: GCC's target_clones, chosen when the program starts by what the processor
// has). Every clone gives the same bits: the file is compiled without contraction, and its
// fmaf calls are exactly rounded in libm and in the instruction alike.
#pragma once

#include <cstdint>

namespace flaxpp::cpu {

// XLA's float32 tanh (flaxpp/kernels/special_math.hpp).
void tanh_f32(const float* x, float* y, std::int64_t n);

// float32 exp, evaluated in double from a table of 2^(i/32) and a degree-6 polynomial and
// rounded once: for every float32 input (all 2^32 checked once, in each clone) the float32
// rounding of glibc's double exp, where glibc's expf differs from that on 170,648 of them. 0
// below log(2^-150), inf above log(FLT_MAX), NaN for NaN.
void exp_f32(const float* x, float* y, std::int64_t n);

// float32 integer_pow: integer_pow_rows (cpu_integer_pow.hpp) compiled per instruction set;
// products only, so every clone gives its bits.
void integer_pow_f32(std::int64_t power, const float* x, float* y, std::int64_t n);

}  // namespace flaxpp::cpu
