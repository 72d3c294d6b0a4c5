// Uploads from pageable host memory through pinned staging slots (desk review F5): CUDA
// promises that a copy from pageable memory has read its source on return only for the
// synchronous cudaMemcpy, not for cudaMemcpyAsync, and Backend::copy_from_host lets the
// caller free the source at once. Copying the bytes into a pinned slot first makes the
// asynchronous upload safe without waiting for the GPU to drain the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <mutex>

namespace flaxpp::cuda {

class HostStaging {
 public:
  // Slots hold uploads up to this size; larger ones are the caller's to copy synchronously
  // (a copy that large costs more than the wait). At most kSlots * kMaxSlotBytes is pinned.
  static constexpr std::size_t kMaxSlotBytes = std::size_t{16} << 20;
  static constexpr std::size_t kSlots = 4;

  HostStaging() = default;
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;
  ~HostStaging();

  // Queues a copy of `bytes` (at most kMaxSlotBytes) from host memory `src` to device memory
  // `dst` on `stream`, on the current device; `src` may be reused as soon as it returns. A
  // slot is reused once its previous copy has run (an event), so this waits for the GPU only
  // when kSlots uploads are still queued.
  void upload(const void* src, void* dst, std::size_t bytes, cudaStream_t stream);

 private:
  struct Slot {
    void* host = nullptr;  // pinned, `capacity` bytes
    std::size_t capacity = 0;
    cudaEvent_t done = nullptr;  // recorded after the slot's last copy
  };
  std::mutex mutex_;
  std::array<Slot, kSlots> slots_{};
  std::size_t next_ = 0;
};

}  // namespace flaxpp::cuda
