// CPU backend memory: aligned host allocations and memcpy.
#include "backend/cpu/cpu_backend.hpp"

#include <cstdlib>
#include <cstring>

namespace flaxpp::cpu {
namespace {
// Alignment for vector loads and BLAS; also the rounding unit of allocation sizes.
constexpr std::size_t kAlignment = 64;
}  // namespace

void* CpuBackend::allocate_impl(std::int64_t bytes, MemoryKind /*kind*/) {
  // aligned_alloc needs a size that is a multiple of the alignment, and a non-zero one so
  // that every buffer has a distinct address.
  const auto rounded = (static_cast<std::size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
}

void CpuBackend::deallocate_impl(void* data, std::int64_t /*bytes*/, MemoryKind /*kind*/) noexcept {
  std::free(data);
}

void CpuBackend::copy_to_host_impl(const void* src, void* dst, std::int64_t bytes) const {
  std::memcpy(dst, src, static_cast<std::size_t>(bytes));
}

void CpuBackend::copy_from_host_impl(const void* src, void* dst, std::int64_t bytes) const {
  std::memcpy(dst, src, static_cast<std::size_t>(bytes));
}

void CpuBackend::copy_impl(const void* src, void* dst, std::int64_t bytes) const {
  std::memcpy(dst, src, static_cast<std::size_t>(bytes));
}

}  // namespace flaxpp::cpu
