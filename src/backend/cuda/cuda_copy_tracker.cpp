// The side-stream copies in flight (cuda_copy_tracker.hpp).
#include "backend/cuda/cuda_copy_tracker.hpp"

#include "backend/cuda/cuda_check.hpp"

namespace flaxpp::cuda {

void CopyTracker::copied(const void* src, const void* dst, cudaStream_t copy_stream) {
  cudaEvent_t e = nullptr;
  FLAXPP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  const std::shared_ptr<CUevent_st> done(e, [](cudaEvent_t ev) { (void)cudaEventDestroy(ev); });
  FLAXPP_CUDA_CHECK(cudaEventRecord(done.get(), copy_stream));
  std::lock_guard lock(mutex_);
  done_[src] = done;
  done_[dst] = done;
}

void CopyTracker::order_after(const void* ptr, cudaStream_t stream) const {
  std::shared_ptr<CUevent_st> done;
  {
    std::lock_guard lock(mutex_);
    if (auto it = done_.find(ptr); it != done_.end()) done = it->second;
  }
  if (done) FLAXPP_CUDA_CHECK(cudaStreamWaitEvent(stream, done.get(), 0));
}

bool CopyTracker::forget(const void* ptr) noexcept {
  std::lock_guard lock(mutex_);
  return done_.erase(ptr) != 0;
}

}  // namespace flaxpp::cuda
