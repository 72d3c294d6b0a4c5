// Pinned host blocks freed by the backend, kept for reuse: cudaMallocHost and cudaFreeHost
// synchronise the device, which an offload per residual must not. Blocks are kept by
// page-rounded size, up to kLimit free bytes, each reusable once both of the backend's streams
// have passed the work queued before its release (a restore may still be reading it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace flaxpp::cuda {

class PinnedCache {
 public:
  static constexpr std::size_t kPage = 4096;
  static constexpr std::size_t kLimit = std::size_t{1} << 30;
  // The size of the block that holds `bytes` (page-rounded; at least a page).
  static std::size_t block_size(std::int64_t bytes);

  PinnedCache() = default;
  // Frees the kept blocks once the device has finished its work.
  ~PinnedCache();
  PinnedCache(const PinnedCache&) = delete;
  PinnedCache& operator=(const PinnedCache&) = delete;

  // A kept block of `size` bytes that no queued work uses any more, or nullptr.
  void* take(std::size_t size);
  // Keeps the block `ptr` of `size` bytes, released now, with events on `main` and `copy`;
  // false when it cannot (the cache is full, an event could not be made): the caller frees it.
  bool keep(void* ptr, std::size_t size, cudaStream_t main, cudaStream_t copy) noexcept;

 private:
  struct Block {
    void* ptr;
    std::shared_ptr<CUevent_st> main_done, copy_done;
  };
  std::mutex mutex_;
  std::map<std::size_t, std::vector<Block>> blocks_;
  std::size_t bytes_ = 0;  // kept
};

}  // namespace flaxpp::cuda
