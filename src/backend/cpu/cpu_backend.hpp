// The CPU backend: the complete reference backend. Host memory, 64-byte aligned; the
// pinned_host kind is plain host memory counted apart. Large blocks are cached by size, as the
// CUDA pool keeps its memory: a training step frees and reallocates the same sizes every
// step, and handing them back to the OS costs an mmap, page faults and zeroing each time.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "flaxpp/core/backend.hpp"

namespace flaxpp::cpu {

class CpuBackend final : public Backend {
 public:
  CpuBackend() : Backend(Device::cpu()) {}
  ~CpuBackend() override;

 protected:
  void* allocate_impl(std::int64_t bytes, MemoryKind kind, std::uint64_t serial) override;
  void deallocate_impl(const Allocation& allocation) noexcept override;
  void copy_to_host_impl(const void* src, void* dst, std::int64_t bytes) const override;
  void copy_from_host_impl(const void* src, void* dst, std::int64_t bytes) const override;
  void copy_impl(const Buffer& src, std::int64_t src_offset, Buffer& dst, std::int64_t dst_offset,
                 std::int64_t bytes) const override;
  void fill_impl(Buffer& dst, const void* value, std::size_t itemsize,
                 std::int64_t count) const override;

 private:
  std::mutex cache_mutex_;
  std::map<std::size_t, std::vector<void*>> cache_;  // free blocks by rounded size
  std::size_t cached_bytes_ = 0;
};

}  // namespace flaxpp::cpu
