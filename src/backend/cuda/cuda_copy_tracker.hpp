// The backend's side-stream copies still in flight (offloads of residuals to pinned host
// memory), by the buffers they read and write, each with the event that completes it: work on
// the main stream that reads or writes such a buffer is ordered after its copy on the GPU, and
// a buffer being freed is forgotten. Thread-safe (frees come from any thread).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <unordered_map>

namespace flaxpp::cuda {

class CopyTracker {
 public:
  // Records an event on `copy_stream` after the copy from `src` to `dst` queued there, and
  // tracks both buffers until they are forgotten.
  void copied(const void* src, const void* dst, cudaStream_t copy_stream);
  // Makes `stream` wait (on the GPU) for the copy that reads or writes `ptr`, if any.
  void order_after(const void* ptr, cudaStream_t stream) const;
  // Stops tracking `ptr` (its buffer is being freed); whether a copy involved it.
  bool forget(const void* ptr) noexcept;

 private:
  mutable std::mutex mutex_;
  // An entry lives until its buffer is freed.
  std::unordered_map<const void*, std::shared_ptr<CUevent_st>> done_;
};

}  // namespace flaxpp::cuda
