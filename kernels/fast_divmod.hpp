// kernels/fast_divmod.hpp — division by a run-time constant as a multiply and a shift
// (Granlund and Montgomery, as CUTLASS's FastDivmod does it): the gather kernel splits every
// element's index into coordinates, and a 64-bit `/` and `%` per axis per element costs more
// than the copy itself. Host and device code; exact for dividends in [0, 2^31), which the
// caller checks (tested exhaustively near the limits on the CPU).
#pragma once

#include <cstdint>

#include "flaxpp/kernels/hd.hpp"

namespace flaxpp::kernels {

class FastDivmod {
 public:
  static constexpr std::uint32_t kMaxDividend = 0x7fffffffu;  // dividends in [0, 2^31)

  FastDivmod() = default;
  // divisor in [1, 2^31).
  explicit FastDivmod(std::uint32_t divisor) : divisor_(divisor) {
    if (divisor == 1) return;  // multiplier 0 marks the identity
    // p = 31 + ceil(log2 d): m = ceil(2^p / d) < 2^32, and q = (n * m) >> p is exact for
    // n < 2^31.
    int log2_ceil = 0;
    while ((std::uint64_t{1} << log2_ceil) < divisor)
      ++log2_ceil;
    const int p = 31 + log2_ceil;
    multiplier_ = static_cast<std::uint32_t>(((std::uint64_t{1} << p) + divisor - 1) / divisor);
    shift_ = static_cast<std::uint32_t>(p - 32);
  }

  FLAXPP_HD std::uint32_t divisor() const { return divisor_; }
  FLAXPP_HD std::uint32_t quotient(std::uint32_t n) const {
    if (multiplier_ == 0) return n;
#if defined(__CUDA_ARCH__)
    return __umulhi(n, multiplier_) >> shift_;
#else
    return static_cast<std::uint32_t>((std::uint64_t{n} * multiplier_) >> 32) >> shift_;
#endif
  }
  // n = q * divisor + r.
  FLAXPP_HD void divmod(std::uint32_t n, std::uint32_t& q, std::uint32_t& r) const {
    q = quotient(n);
    r = n - q * divisor_;
  }

 private:
  std::uint32_t divisor_ = 1;
  std::uint32_t multiplier_ = 0;
  std::uint32_t shift_ = 0;
};

}  // namespace flaxpp::kernels
