// Pinned staging slots for uploads from pageable host memory (cuda_staging.hpp).
#include "backend/cuda/cuda_staging.hpp"

#include <cstdio>
#include <cstring>

#include "backend/cuda/cuda_check.hpp"

namespace flaxpp::cuda {

HostStaging::~HostStaging() {
  // Destructors never throw: each slot's copy is waited for, then its memory freed.
  for (Slot& slot : slots_) {
    if (slot.done != nullptr) {
      if (cudaEventSynchronize(slot.done) != cudaSuccess || cudaEventDestroy(slot.done) != cudaSuccess)
        std::fprintf(stderr, "flaxpp: releasing a CUDA staging slot failed\n");
    }
    if (slot.host != nullptr) (void)cudaFreeHost(slot.host);
  }
}

void HostStaging::upload(const void* src, void* dst, std::size_t bytes, cudaStream_t stream) {
  FLAXPP_ASSERT(bytes <= kMaxSlotBytes, "HostStaging::upload: ", bytes, " bytes");
  std::lock_guard lock(mutex_);
  Slot& slot = slots_[next_];
  next_ = (next_ + 1) % kSlots;
  if (slot.done == nullptr) {
    FLAXPP_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
  } else {
    FLAXPP_CUDA_CHECK(cudaEventSynchronize(slot.done));  // the slot's last copy has read it
  }
  if (slot.capacity < bytes) {
    // Grows in powers of two from 64 KiB, so a loop of similar uploads settles at once.
    std::size_t capacity = std::size_t{64} << 10;
    while (capacity < bytes)
      capacity *= 2;
    if (slot.host != nullptr) FLAXPP_CUDA_CHECK(cudaFreeHost(slot.host));
    slot.host = nullptr;
    slot.capacity = 0;
    FLAXPP_CUDA_CHECK(cudaMallocHost(&slot.host, capacity));
    slot.capacity = capacity;
  }
  std::memcpy(slot.host, src, bytes);
  FLAXPP_CUDA_CHECK(cudaMemcpyAsync(dst, slot.host, bytes, cudaMemcpyHostToDevice, stream));
  FLAXPP_CUDA_CHECK(cudaEventRecord(slot.done, stream));
}

}  // namespace flaxpp::cuda
