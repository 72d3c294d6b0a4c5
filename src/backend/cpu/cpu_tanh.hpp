// The CPU's float32 tanh over an array (XLA's rational approximation, flaxpp/kernels/special_math.hpp):
// compiled three times where the compiler can (for AVX-512, for FMA, and for any x86-64) and
// chosen when the program starts by what the processor has. Without FMA the approximation's
// fmaf calls are calls into libm; with it they are one instruction each, and the loop is
// vectorised (16 lanes with AVX-512, 8 with FMA's AVX). All are exactly rounded: the same bits.
#pragma once

#include <cstdint>

namespace flaxpp::cpu {

void tanh_f32(const float* x, float* y, std::int64_t n);

}  // namespace flaxpp::cpu
