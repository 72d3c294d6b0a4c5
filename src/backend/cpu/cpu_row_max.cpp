// max_rows_f32 (cpu_row_max.hpp). kernels::Max's NaN and signed-zero cases make it a chain of
// compares and selects that GCC vectorises poorly (about 1 ns per element at rows of 64), so
// the loop compares integers instead: key(x) orders float32 values as numbers, with -0 below
// +0, and one 16-lane vector of running maxima (GCC's vector extension: one register with
// AVX-512, two with AVX2, four with SSE2) takes 16 elements per step. A NaN's key lies above
// +inf's or below -inf's, so a running minimum beside the maximum says whether the row has one.
#include "backend/cpu/cpu_row_max.hpp"

#include <bit>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_clones.hpp"

namespace flaxpp::cpu {
namespace {

using Keys = std::int32_t __attribute__((vector_size(64)));
constexpr int kLanes = 16;

// Flips the magnitude bits of negative values (its own inverse): a signed integer order equal
// to the numbers'. For one int32 or a vector of them (in place: a vector returned by value
// would have another ABI in each clone).
template <class I>
constexpr void flip_negatives(I& bits) {
  bits ^= (bits >> 31) & 0x7fffffff;
}
constexpr std::int32_t key(float v) {
  auto bits = std::bit_cast<std::int32_t>(v);
  flip_negatives(bits);
  return bits;
}
constexpr float value_of(std::int32_t k) {
  flip_negatives(k);
  return std::bit_cast<float>(k);
}

}  // namespace

FLAXPP_CPU_CLONES void max_rows_f32(const float* x, std::int64_t rows, std::int64_t n, float* y) {
  constexpr std::int32_t kNegInf = key(-INFINITY), kPosInf = key(INFINITY);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    Keys hi = Keys{} + kNegInf, lo = Keys{} + kPosInf;
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      Keys k;
      std::memcpy(&k, row + i, sizeof k);
      flip_negatives(k);
      hi = k > hi ? k : hi;
      lo = k < lo ? k : lo;
    }
    std::int32_t most = kNegInf, least = kPosInf;
    for (int l = 0; l < kLanes; ++l) {
      most = hi[l] > most ? hi[l] : most;
      least = lo[l] < least ? lo[l] : least;
    }
    for (; i < n; ++i) {
      const std::int32_t k = key(row[i]);
      most = k > most ? k : most;
      least = k < least ? k : least;
    }
    float result = value_of(most);
    if (most > kPosInf || least < kNegInf)  // a NaN: the row's first
      for (std::int64_t j = 0; j < n; ++j)
        if (std::isnan(row[j])) {
          result = row[j];
          break;
        }
    y[r] = result;
  }
}

}  // namespace flaxpp::cpu
