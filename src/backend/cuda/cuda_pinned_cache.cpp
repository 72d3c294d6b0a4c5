// The backend's cache of pinned host blocks (cuda_pinned_cache.hpp).
#include "backend/cuda/cuda_pinned_cache.hpp"

namespace flaxpp::cuda {
namespace {

// An event recorded on `stream` now, or nullptr (the error cleared) when that failed.
std::shared_ptr<CUevent_st> recorded_event(cudaStream_t stream) noexcept {
  cudaEvent_t e = nullptr;
  if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  try {
    std::shared_ptr<CUevent_st> event(e, [](cudaEvent_t ev) { (void)cudaEventDestroy(ev); });
    if (cudaEventRecord(e, stream) == cudaSuccess) return event;
  } catch (...) {  // no memory for the control block: the deleter has destroyed the event
  }
  (void)cudaGetLastError();
  return nullptr;
}

// Whether the work before `e` has finished. "Not yet" (cudaErrorNotReady) is an answer, not a
// failure: it is cleared from the last-error slot, where the next launch check would find it.
bool completed(const std::shared_ptr<CUevent_st>& e) {
  const cudaError_t err = cudaEventQuery(e.get());
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) (void)cudaGetLastError();
  return false;
}

}  // namespace

std::size_t PinnedCache::block_size(std::int64_t bytes) {
  const auto b = static_cast<std::size_t>(bytes == 0 ? 1 : bytes);
  return (b + kPage - 1) / kPage * kPage;
}

PinnedCache::~PinnedCache() {
  if (cudaDeviceSynchronize() != cudaSuccess) return;  // the blocks may be in use: leak them
  for (auto& [size, blocks] : blocks_)
    for (const Block& b : blocks)
      (void)cudaFreeHost(b.ptr);
}

void* PinnedCache::take(std::size_t size) {
  std::lock_guard lock(mutex_);
  auto it = blocks_.find(size);
  if (it == blocks_.end()) return nullptr;
  auto& blocks = it->second;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    // Reusable once both streams are past everything that used it.
    if (!completed(blocks[i].main_done) || !completed(blocks[i].copy_done)) continue;
    void* ptr = blocks[i].ptr;
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
    bytes_ -= size;
    return ptr;
  }
  return nullptr;
}

bool PinnedCache::keep(void* ptr, std::size_t size, cudaStream_t main, cudaStream_t copy) noexcept {
  Block block{ptr, recorded_event(main), recorded_event(copy)};
  if (!block.main_done || !block.copy_done) return false;
  std::lock_guard lock(mutex_);
  if (bytes_ + size > kLimit) return false;
  try {
    blocks_[size].push_back(std::move(block));
  } catch (...) {  // no memory for the entry
    return false;
  }
  bytes_ += size;
  return true;
}

}  // namespace flaxpp::cuda
