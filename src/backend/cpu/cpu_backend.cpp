// CPU backend memory: aligned host allocations and copies (shared among the CPU's threads).
#include "backend/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_parallel.hpp"

// Under AddressSanitizer a cached block is poisoned until it is handed out again, so a use
// after free is still caught although the block was not returned to malloc.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define FLAXPP_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define FLAXPP_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define FLAXPP_POISON(p, n) ((void)(p), (void)(n))
#define FLAXPP_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace flaxpp::cpu {
namespace {
// Alignment for vector loads and BLAS; also the rounding unit of small allocation sizes.
constexpr std::size_t kAlignment = 64;
// Blocks of at least this size are cached, rounded up to whole pages so that nearby sizes
// share a free list (malloc serves smaller ones from its own free lists).
constexpr std::size_t kCachedMin = 4 * 1024;
constexpr std::size_t kPage = 4096;
// Beyond this many cached free bytes, freed blocks go back to the system.
constexpr std::size_t kCacheLimit = std::size_t{1} << 30;

std::size_t rounded_size(std::int64_t bytes) {
  const auto b = static_cast<std::size_t>(bytes);
  if (b >= kCachedMin) return (b + kPage - 1) / kPage * kPage;
  // aligned_alloc needs a size that is a multiple of the alignment, and a non-zero one so
  // that every buffer has a distinct address.
  return b == 0 ? kAlignment : (b + kAlignment - 1) / kAlignment * kAlignment;
}

}  // namespace

CpuBackend::~CpuBackend() {
  for (auto& [size, blocks] : cache_)
    for (void* block : blocks) {
      FLAXPP_UNPOISON(block, size);
      std::free(block);
    }
}

void* CpuBackend::allocate_impl(std::int64_t bytes, MemoryKind /*kind*/, std::uint64_t /*serial*/) {
  const std::size_t size = rounded_size(bytes);
  if (size >= kCachedMin) {
    std::lock_guard lock(cache_mutex_);
    if (auto it = cache_.find(size); it != cache_.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= size;
      FLAXPP_UNPOISON(block, size);
      return block;
    }
  }
  return std::aligned_alloc(kAlignment, size);
}

void CpuBackend::deallocate_impl(const Allocation& allocation) noexcept {
  void* const data = allocation.data;
  const std::size_t size = rounded_size(allocation.bytes);
  if (size >= kCachedMin) {
    std::lock_guard lock(cache_mutex_);
    if (cached_bytes_ + size <= kCacheLimit) {
      try {
        cache_[size].push_back(data);
        cached_bytes_ += size;
        FLAXPP_POISON(data, size);
        return;
      } catch (...) {  // no memory for the list entry: free the block instead
      }
    }
  }
  std::free(data);
}

void CpuBackend::copy_to_host_impl(const void* src, void* dst, std::int64_t bytes) const {
  std::memcpy(dst, src, static_cast<std::size_t>(bytes));
}

void CpuBackend::copy_from_host_impl(const void* src, void* dst, std::int64_t bytes) const {
  std::memcpy(dst, src, static_cast<std::size_t>(bytes));
}

void CpuBackend::copy_impl(const Buffer& src, std::int64_t src_offset, Buffer& dst,
                           std::int64_t dst_offset, std::int64_t bytes) const {
  // In blocks of 4 KiB shared among the threads (a scan's rows are megabytes), each share at
  // least the elementwise loops' least.
  constexpr std::int64_t kBlock = 4096;
  constexpr std::int64_t kMinShareBlocks = kMinShareElements * 4 / kBlock;
  std::byte* const to = static_cast<std::byte*>(dst.data()) + dst_offset;
  const std::byte* const from = static_cast<const std::byte*>(src.data()) + src_offset;
  parallel_for((bytes + kBlock - 1) / kBlock, kMinShareBlocks,
               [&](std::int64_t begin, std::int64_t end) {
                 const std::int64_t first = begin * kBlock;
                 const std::int64_t last = std::min(end * kBlock, bytes);
                 std::memcpy(to + first, from + first, static_cast<std::size_t>(last - first));
               });
}

namespace {
template <class T>
void fill_as(void* dst, const void* value, std::int64_t count) {
  T v;
  std::memcpy(&v, value, sizeof v);
  std::fill_n(static_cast<T*>(dst), count, v);
}
}  // namespace

void CpuBackend::fill_impl(Buffer& dst, const void* value, std::size_t itemsize,
                           std::int64_t count) const {
  switch (itemsize) {
    case 1:
      return fill_as<std::uint8_t>(dst.data(), value, count);
    case 2:
      return fill_as<std::uint16_t>(dst.data(), value, count);
    case 4:
      return fill_as<std::uint32_t>(dst.data(), value, count);
    default:
      return fill_as<std::uint64_t>(dst.data(), value, count);
  }
}

}  // namespace flaxpp::cpu
