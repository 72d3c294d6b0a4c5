// tanh_f32: one loop, cloned for AVX-512 and for FMA (GCC on x86-64: target_clones picks the
// clone at load time); the same bits in every clone.
#include "backend/cpu/cpu_tanh.hpp"

#include "flaxpp/kernels/special_math.hpp"

namespace flaxpp::cpu {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "fma", "default")))
#endif
void tanh_f32(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = kernels::xla_tanh_f32(x[i]);
}

}  // namespace flaxpp::cpu
