// CUDA backend memory: stream-ordered device allocations from a per-device pool, pinned host
// allocations, copies on the backend's stream, offload copies on a side stream ordered by
// events, and fills. A benign error a call returns (an event not yet reached, a failed free
// already reported) is cleared from the runtime's last-error slot at once, so that the next
// launch check does not blame an innocent kernel for it (desk review F3).
#include "backend/cuda/cuda_backend.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "backend/cuda/cuda_check.hpp"
#include "kernels/fill.hpp"

namespace flaxpp::cuda {

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver"/"no device" error
    return 0;
  }
  return count;
}

CudaBackend::CudaBackend(int index) : Backend(Device::cuda(index)), index_(index) {
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  FLAXPP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  FLAXPP_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  FLAXPP_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, index_));
  std::size_t free_bytes = 0;
  FLAXPP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_memory_));
  // Keep freed memory in the pool instead of returning it at every synchronisation: the
  // executor frees and reallocates the same sizes every step.
  std::uint64_t threshold = UINT64_MAX;
  FLAXPP_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold));
  index_faults_ = std::make_unique<IndexFaults>();
}

CudaBackend::~CudaBackend() {
  // Destructors never throw: report and go on.
  destroy_retired_graphs();
  if (cudaDeviceSynchronize() == cudaSuccess)
    for (auto& [size, blocks] : pinned_cache_)
      for (const PinnedBlock& b : blocks)
        (void)cudaFreeHost(b.ptr);
  if (blas_ != nullptr && cublasDestroy(blas_) != CUBLAS_STATUS_SUCCESS)
    std::fprintf(stderr, "flaxpp: cublasDestroy failed on cuda:%d\n", index_);
  if (blas_workspace_ != nullptr) (void)cudaFree(blas_workspace_);
  if (copy_stream_ != nullptr && cudaStreamDestroy(copy_stream_) != cudaSuccess)
    std::fprintf(stderr, "flaxpp: cudaStreamDestroy failed on cuda:%d\n", index_);
  if (stream_ != nullptr && cudaStreamDestroy(stream_) != cudaSuccess)
    std::fprintf(stderr, "flaxpp: cudaStreamDestroy failed on cuda:%d\n", index_);
}

void CudaBackend::synchronize() const {
  refuse_in_capture("waiting for the GPU (synchronize)");
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));  // offload copies (desk review F8)
  index_faults_->raise_pending();
}

cublasHandle_t CudaBackend::blas() {
  std::call_once(blas_once_, [this] {
    // cudaMalloc and cublasCreate cannot be recorded: the first product runs eagerly.
    refuse_in_capture("creating the cuBLAS handle (run one step eagerly before recording)");
    FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
    void* workspace = nullptr;
    FLAXPP_CUDA_CHECK(cudaMalloc(&workspace, kBlasWorkspaceBytes));
    cublasHandle_t handle = nullptr;
    cublasStatus_t status = cublasCreate(&handle);
    const char* call = "cublasCreate";
    // cublasSetStream resets the workspace to cuBLAS's own: the workspace is set after it.
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasSetStream(handle, stream_);
      call = "cublasSetStream";
    }
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasSetWorkspace(handle, workspace, kBlasWorkspaceBytes);
      call = "cublasSetWorkspace";
    }
    // Split-k partial sums of bf16/f16 products stay in float32, as XLA accumulates them.
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasSetMathMode(
          handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                            CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
      call = "cublasSetMathMode";
    }
    if (status != CUBLAS_STATUS_SUCCESS) {
      if (handle != nullptr) (void)cublasDestroy(handle);
      (void)cudaFree(workspace);
      throw_cublas_error(status, call, __FILE__, __LINE__);
    }
    blas_workspace_ = workspace;
    blas_ = handle;
  });
  return blas_;
}

namespace {

// Pinned blocks are cached by page-rounded size, up to this many free bytes: cudaMallocHost
// and cudaFreeHost synchronise the device, which an offload per residual must not.
constexpr std::size_t kPinnedPage = 4096;
constexpr std::size_t kPinnedCacheLimit = std::size_t{1} << 30;

std::size_t pinned_size(std::int64_t bytes) {
  const auto b = static_cast<std::size_t>(bytes == 0 ? 1 : bytes);
  return (b + kPinnedPage - 1) / kPinnedPage * kPinnedPage;
}

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

void* CudaBackend::take_pinned(std::size_t size) {
  std::lock_guard lock(pinned_mutex_);
  auto it = pinned_cache_.find(size);
  if (it == pinned_cache_.end()) return nullptr;
  auto& blocks = it->second;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    // Reusable once both streams are past everything that used it.
    if (!completed(blocks[i].main_done) || !completed(blocks[i].copy_done)) continue;
    void* ptr = blocks[i].ptr;
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
    pinned_cached_ -= size;
    return ptr;
  }
  return nullptr;
}

void CudaBackend::refuse_in_capture(const char* what) const {
  if (!capturing_.load(std::memory_order_acquire)) return;
  const std::string problem = detail::str(what, " cannot be part of a CUDA graph recording");
  {
    std::lock_guard lock(mutex_);
    if (capture_) capture_->fail(problem.c_str());
  }
  throw DeviceError(problem);
}

void* CudaBackend::allocate_impl(std::int64_t bytes, MemoryKind kind, std::uint64_t serial) {
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  if (kind == MemoryKind::pinned_host) {
    refuse_in_capture("pinned host memory (an offload policy)");
    if (void* cached = take_pinned(pinned_size(bytes))) return cached;
  }
  const auto size = static_cast<std::size_t>(bytes == 0 ? 1 : bytes);
  // More than the device has is out of memory, whatever the driver would answer for a request
  // beyond its address range (desk review F6).
  if (kind == MemoryKind::device && size > total_memory_) return nullptr;
  void* ptr = nullptr;
  const auto allocate = [&] {
    return kind == MemoryKind::device ? cudaMallocFromPoolAsync(&ptr, size, pool_, stream_)
                                      : cudaMallocHost(&ptr, pinned_size(bytes));
  };
  cudaError_t err = allocate();
  // Out of device memory: once more after giving back what caches hold (desk review 2 #5),
  // except in a recording, which cannot wait for the stream. The lock keeps a recording from
  // beginning (on another thread) while the streams are waited for.
  if (err == cudaErrorMemoryAllocation && kind == MemoryKind::device) {
    (void)cudaGetLastError();
    std::lock_guard lock(mutex_);
    if (!capture_.has_value()) {
      release_cached_memory();
      err = allocate();
    }
  }
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;  // the base class turns this into an OutOfMemoryError with the stats
  }
  if (err != cudaSuccess) throw_cuda_error(err, "allocate", __FILE__, __LINE__);
  if (kind == MemoryKind::device && capturing_.load(std::memory_order_acquire)) {
    std::lock_guard lock(mutex_);
    if (capture_) capture_->made.insert(serial);
  }
  return ptr;
}

void CudaBackend::deallocate_impl(const Allocation& a) noexcept {
  (void)cudaSetDevice(index_);
  bool copying = false;  // a side-stream copy reads or writes this buffer
  {
    std::lock_guard lock(mutex_);
    if (a.kind == MemoryKind::device && never_made_.erase(a.serial) != 0) return;
    if (capture_) {
      if (a.kind == MemoryKind::device && capture_->made.erase(a.serial) != 0) {
        // A graph allocation freed inside the recording becomes a free node. If the capture
        // was invalidated, this fails as everything queued now does: it ends with the capture.
        (void)cudaFreeAsync(a.data, stream_);
        (void)cudaGetLastError();
        return;
      }
      // A buffer from before the capture cannot be freed by a graph (and the recording may
      // read it), and pinned memory's events would be recorded into it: the free waits for the
      // end of the capture, which fails.
      try {
        capture_->deferred_frees.push_back(a);
      } catch (...) {  // no memory to note it: the buffer leaks
      }
      capture_->fail(a.kind == MemoryKind::device
                         ? "the recorded work released a buffer allocated before the recording "
                           "began (the recording would read freed memory); keep its inputs "
                           "alive while recording"
                         : "pinned host memory (an offload policy) cannot be part of a CUDA "
                           "graph recording");
      return;
    }
    copying = pending_.erase(a.data) != 0;
  }
  cudaError_t err = cudaSuccess;
  if (a.kind == MemoryKind::device) {
    // Stream-ordered free. A buffer a side-stream copy reads is freed on that stream, after
    // the copy and after everything queued on the main stream so far (an event orders them).
    if (copying) {
      cudaEvent_t main_done = nullptr;
      err = cudaEventCreateWithFlags(&main_done, cudaEventDisableTiming);
      if (err == cudaSuccess) err = cudaEventRecord(main_done, stream_);
      if (err == cudaSuccess) err = cudaStreamWaitEvent(copy_stream_, main_done, 0);
      if (main_done != nullptr) (void)cudaEventDestroy(main_done);
    }
    if (err == cudaSuccess) err = cudaFreeAsync(a.data, copying ? copy_stream_ : stream_);
  } else {
    // Pinned memory goes back to the cache, reusable once both streams have passed the work
    // queued so far (a restore may still be reading it). Only beyond the cache's limit, or
    // without events, is it freed at once, after both streams finish.
    const std::size_t size = pinned_size(a.bytes);
    PinnedBlock block{a.data, recorded_event(stream_), recorded_event(copy_stream_)};
    if (block.main_done && block.copy_done) {
      std::lock_guard lock(pinned_mutex_);
      if (pinned_cached_ + size <= kPinnedCacheLimit) {
        try {
          pinned_cache_[size].push_back(std::move(block));
          pinned_cached_ += size;
          return;
        } catch (...) {  // no memory for the entry: free the block below
        }
      }
    }
    err = cudaStreamSynchronize(copy_stream_);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream_);
    if (err == cudaSuccess) err = cudaFreeHost(a.data);
  }
  if (err != cudaSuccess) {
    std::fprintf(stderr, "flaxpp: freeing CUDA memory failed: %s\n", cudaGetErrorString(err));
    (void)cudaGetLastError();  // reported: not the next kernel's error
  }
}

void CudaBackend::wait_for_copy(const void* ptr) const {
  std::shared_ptr<CUevent_st> done;
  {
    std::lock_guard lock(mutex_);
    if (auto it = pending_.find(ptr); it != pending_.end()) done = it->second;
  }
  if (done) FLAXPP_CUDA_CHECK(cudaStreamWaitEvent(stream_, done.get(), 0));
}

void CudaBackend::copy_async_impl(const Buffer& src, Buffer& dst, std::int64_t bytes) {
  refuse_in_capture("a copy between memory kinds (an offload policy)");
  const bool offload =
      src.memory_kind() == MemoryKind::device && dst.memory_kind() == MemoryKind::pinned_host;
  const bool restore =
      src.memory_kind() == MemoryKind::pinned_host && dst.memory_kind() == MemoryKind::device;
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  if (restore) {
    // Ordered after the offload on the GPU; the source stays alive (and pinned memory is freed
    // only after a synchronisation) until the copy has run.
    wait_for_copy(src.data());
    FLAXPP_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), static_cast<std::size_t>(bytes),
                                      cudaMemcpyHostToDevice, stream_));
    return;
  }
  if (!offload) {
    copy_impl(src, 0, dst, 0, bytes);
    return;
  }
  auto make_event = [] {
    cudaEvent_t e = nullptr;
    FLAXPP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return std::shared_ptr<CUevent_st>(e, [](cudaEvent_t ev) { (void)cudaEventDestroy(ev); });
  };
  const std::shared_ptr<CUevent_st> ready = make_event(), done = make_event();
  FLAXPP_CUDA_CHECK(cudaEventRecord(ready.get(), stream_));  // the source has been computed
  FLAXPP_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, ready.get(), 0));
  FLAXPP_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), static_cast<std::size_t>(bytes),
                                    cudaMemcpyDeviceToHost, copy_stream_));
  FLAXPP_CUDA_CHECK(cudaEventRecord(done.get(), copy_stream_));
  std::lock_guard lock(mutex_);
  pending_[src.data()] = done;
  pending_[dst.data()] = done;
}

void CudaBackend::copy_to_host_impl(const void* src, void* dst, std::int64_t bytes) const {
  refuse_in_capture("a device-to-host copy");
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  wait_for_copy(src);
  FLAXPP_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, static_cast<std::size_t>(bytes), cudaMemcpyDefault, stream_));
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  index_faults_->raise_pending();
}

void CudaBackend::copy_from_host_impl(const void* src, void* dst, std::int64_t bytes) const {
  refuse_in_capture("a host-to-device copy");
  // The staging slots' events and memory belong to the current device: make it this one.
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  const auto size = static_cast<std::size_t>(bytes);
  cudaPointerAttributes attributes{};
  FLAXPP_CUDA_CHECK(cudaPointerGetAttributes(&attributes, src));
  if (attributes.type == cudaMemoryTypeUnregistered && size <= HostStaging::kMaxSlotBytes) {
    // Pageable memory, which the caller may free on return: through a pinned staging slot,
    // without waiting for the stream (desk review F5).
    staging_.upload(src, dst, size, stream_);
    return;
  }
  // Pinned memory (or a large pageable copy): the caller's source is read before returning.
  FLAXPP_CUDA_CHECK(cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, stream_));
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_impl(const Buffer& src, std::int64_t src_offset, Buffer& dst,
                            std::int64_t dst_offset, std::int64_t bytes) const {
  const bool on_device =
      src.memory_kind() == MemoryKind::device && dst.memory_kind() == MemoryKind::device;
  if (!on_device) refuse_in_capture("a copy to or from pinned host memory");
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  wait_for_copy(src.data());
  wait_for_copy(dst.data());
  FLAXPP_CUDA_CHECK(cudaMemcpyAsync(static_cast<std::byte*>(dst.data()) + dst_offset,
                                    static_cast<const std::byte*>(src.data()) + src_offset,
                                    static_cast<std::size_t>(bytes), cudaMemcpyDefault, stream_));
  // Device-to-device copies are ordered like compute; a copy into pinned host memory completes
  // before returning (Backend's contract: the caller may read it next).
  if (!on_device) {
    FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_));
    index_faults_->raise_pending();
  }
}

void CudaBackend::fill_impl(Buffer& dst, const void* value, std::size_t itemsize,
                            std::int64_t count) const {
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  if (dst.memory_kind() != MemoryKind::device) {
    refuse_in_capture("filling pinned host memory");
    synchronize();  // queued work may still read the old bytes
    for (std::int64_t i = 0; i < count; ++i)
      std::memcpy(static_cast<std::byte*>(dst.data()) + i * static_cast<std::int64_t>(itemsize),
                  value, itemsize);
    return;
  }
  wait_for_copy(dst.data());
  const cudaError_t err = kernels::launch_fill(dst.data(), value, itemsize, count, stream_);
  if (err != cudaSuccess) throw_cuda_error(err, "the fill kernel", __FILE__, __LINE__);
}

void CudaBackend::trim_pool() {
  FLAXPP_CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0));
}

void CudaBackend::release_cached_memory() {
  // Frees queued on either stream complete first, so that the trims see them; then the memory
  // destroyed graphs left cached for graphs, and the pool's unused memory, go to the driver.
  // (Not synchronize(): a bad index found meanwhile is the step's error, raised at its sync.)
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));
  FLAXPP_CUDA_CHECK(cudaDeviceGraphMemTrim(index_));
  trim_pool();
}

}  // namespace flaxpp::cuda
