// The CPU backend: the complete reference backend. Host memory, 64-byte aligned; the
// pinned_host kind is plain host memory counted apart.
#pragma once

#include "flaxpp/core/backend.hpp"

namespace flaxpp::cpu {

class CpuBackend final : public Backend {
 public:
  CpuBackend() : Backend(Device::cpu()) {}

 protected:
  void* allocate_impl(std::int64_t bytes, MemoryKind kind) override;
  void deallocate_impl(void* data, std::int64_t bytes, MemoryKind kind) noexcept override;
  void copy_to_host_impl(const void* src, void* dst, std::int64_t bytes) const override;
  void copy_from_host_impl(const void* src, void* dst, std::int64_t bytes) const override;
  void copy_impl(const void* src, void* dst, std::int64_t bytes) const override;
};

}  // namespace flaxpp::cpu
