// flaxpp/kernels/clamp_start.hpp — where a dynamic slice starts, for the CPU and CUDA alike, as
// jax.lax.dynamic_slice and dynamic_update_slice place it: a negative start counts from the end
// (dim is added once), then the start is clamped to [0, dim - size], so that the block always
// lies inside the operand (a start past the end moves the block back).
#ifndef FLAXPP_KERNELS_CLAMP_START_HPP
#define FLAXPP_KERNELS_CLAMP_START_HPP

#include <cstdint>

#include "flaxpp/kernels/hd.hpp"

namespace flaxpp::kernels {

FLAXPP_HD std::int64_t clamp_start(std::int32_t start, std::int64_t dim, std::int64_t size) {
  const std::int64_t s = start < 0 ? start + dim : start;
  return s < 0 ? 0 : (s > dim - size ? dim - size : s);
}

}  // namespace flaxpp::kernels

#endif  // FLAXPP_KERNELS_CLAMP_START_HPP
