// The CPU's float32 tanh over an array (XLA's rational approximation, flaxpp/kernels/special_math.hpp):
// compiled twice where the compiler can, with and without FMA instructions, and chosen when the
// program starts by what the processor has. Without FMA the approximation's fmaf calls are calls
// into libm; with it they are one instruction each. Both are exactly rounded: the same bits.
#pragma once

#include <cstdint>

namespace flaxpp::cpu {

void tanh_f32(const float* x, float* y, std::int64_t n);

}  // namespace flaxpp::cpu
