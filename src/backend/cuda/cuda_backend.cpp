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

int CudaBackend::selected(int index) {
  FLAXPP_CUDA_CHECK(cudaSetDevice(index));
  return index;
}

CudaBackend::CudaBackend(int index)
    : Backend(Device::cuda(index)), index_(selected(index)), blas_(index, stream_.get()) {
  FLAXPP_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, index_));
  std::size_t free_bytes = 0;
  FLAXPP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_memory_));
  // Keep freed memory in the pool instead of returning it at every synchronisation: the
  // executor frees and reallocates the same sizes every step.
  std::uint64_t threshold = UINT64_MAX;
  FLAXPP_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold));
  index_faults_ = std::make_unique<IndexFaults>();
}

CudaBackend::~CudaBackend() = default;  // the members release all, the streams last

void CudaBackend::synchronize() const {
  refuse_in_capture("waiting for the GPU (synchronize)");
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream()));
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()));  // offloads (desk review F8)
  index_faults_->raise_pending();
}

cublasHandle_t CudaBackend::blas() {
  return blas_.get([this] {
    refuse_in_capture("creating the cuBLAS handle (run one step eagerly before recording)");
  });
}

void CudaBackend::refuse_in_capture(const char* what) const {
  if (!recording_.capturing()) return;
  const std::string problem = detail::str(what, " cannot be part of a CUDA graph recording");
  recording_.fail(problem.c_str());
  throw DeviceError(problem);
}

void* CudaBackend::allocate_impl(std::int64_t bytes, MemoryKind kind, std::uint64_t serial) {
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  if (kind == MemoryKind::pinned_host) {
    refuse_in_capture("pinned host memory (an offload policy)");
    if (void* cached = pinned_.take(PinnedCache::block_size(bytes))) return cached;
  }
  const auto size = static_cast<std::size_t>(bytes == 0 ? 1 : bytes);
  // More than the device has is out of memory, whatever the driver would answer for a request
  // beyond its address range (desk review F6).
  if (kind == MemoryKind::device && size > total_memory_) return nullptr;
  void* ptr = nullptr;
  const auto allocate = [&] {
    return kind == MemoryKind::device ? cudaMallocFromPoolAsync(&ptr, size, pool_, stream())
                                      : cudaMallocHost(&ptr, PinnedCache::block_size(bytes));
  };
  cudaError_t err = allocate();
  // Out of device memory: once more after giving back what caches hold (desk review 2 #5),
  // except in a recording, which cannot wait for the stream; nor can one begin (on another
  // thread) while the streams are waited for.
  if (err == cudaErrorMemoryAllocation && kind == MemoryKind::device) {
    (void)cudaGetLastError();
    (void)recording_.unless_recording([&] {
      release_cached_memory();
      err = allocate();
    });
  }
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;  // the base class turns this into an OutOfMemoryError with the stats
  }
  if (err != cudaSuccess) throw_cuda_error(err, "allocate", __FILE__, __LINE__);
  if (kind == MemoryKind::device && recording_.capturing()) recording_.made(serial);
  return ptr;
}

void CudaBackend::deallocate_impl(const Allocation& a) noexcept {
  (void)cudaSetDevice(index_);
  if (recording_.route_free(a) != RecordingState::Free::now) return;
  const bool copying = copies_.forget(a.data);  // a side-stream copy reads or writes it
  cudaError_t err = cudaSuccess;
  if (a.kind == MemoryKind::device) {
    // Stream-ordered free. A buffer a side-stream copy reads is freed on that stream, after
    // the copy and after everything queued on the main stream so far (an event orders them).
    if (copying) {
      cudaEvent_t main_done = nullptr;
      err = cudaEventCreateWithFlags(&main_done, cudaEventDisableTiming);
      if (err == cudaSuccess) err = cudaEventRecord(main_done, stream());
      if (err == cudaSuccess) err = cudaStreamWaitEvent(copy_stream_.get(), main_done, 0);
      if (main_done != nullptr) (void)cudaEventDestroy(main_done);
    }
    if (err == cudaSuccess) err = cudaFreeAsync(a.data, copying ? copy_stream_.get() : stream());
  } else {
    // Pinned memory goes back to the cache, reusable once both streams have passed the work
    // queued so far (a restore may still be reading it). Only beyond the cache's limit, or
    // without events, is it freed at once, after both streams finish.
    if (pinned_.keep(a.data, PinnedCache::block_size(a.bytes), stream(), copy_stream_.get()))
      return;
    err = cudaStreamSynchronize(copy_stream_.get());
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream());
    if (err == cudaSuccess) err = cudaFreeHost(a.data);
  }
  if (err != cudaSuccess) {
    std::fprintf(stderr, "flaxpp: freeing CUDA memory failed: %s\n", cudaGetErrorString(err));
    (void)cudaGetLastError();  // reported: not the next kernel's error
  }
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
                                      cudaMemcpyHostToDevice, stream()));
    return;
  }
  if (!offload) {
    copy_impl(src, 0, dst, 0, bytes);
    return;
  }
  // The copy stream waits (on the GPU) until the source has been computed.
  cudaEvent_t ready = nullptr;
  FLAXPP_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  const std::unique_ptr<CUevent_st, cudaError_t (*)(cudaEvent_t)> owned(ready, cudaEventDestroy);
  FLAXPP_CUDA_CHECK(cudaEventRecord(ready, stream()));
  FLAXPP_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_.get(), ready, 0));
  FLAXPP_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), static_cast<std::size_t>(bytes),
                                    cudaMemcpyDeviceToHost, copy_stream_.get()));
  copies_.copied(src.data(), dst.data(), copy_stream_.get());
}

void CudaBackend::copy_to_host_impl(const void* src, void* dst, std::int64_t bytes) const {
  refuse_in_capture("a device-to-host copy");
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  wait_for_copy(src);
  FLAXPP_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, static_cast<std::size_t>(bytes), cudaMemcpyDefault, stream()));
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream()));
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
    staging_.upload(src, dst, size, stream());
    return;
  }
  // Pinned memory (or a large pageable copy): the caller's source is read before returning.
  FLAXPP_CUDA_CHECK(cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, stream()));
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream()));
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
                                    static_cast<std::size_t>(bytes), cudaMemcpyDefault, stream()));
  // Device-to-device copies are ordered like compute; a copy into pinned host memory completes
  // before returning (Backend's contract: the caller may read it next).
  if (!on_device) {
    FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream()));
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
  const cudaError_t err = kernels::launch_fill(dst.data(), value, itemsize, count, stream());
  if (err != cudaSuccess) throw_cuda_error(err, "the fill kernel", __FILE__, __LINE__);
}

void CudaBackend::trim_pool() {
  FLAXPP_CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0));
}

void CudaBackend::release_cached_memory() {
  // Frees queued on either stream complete first, so that the trims see them; then the memory
  // destroyed graphs left cached for graphs, and the pool's unused memory, go to the driver.
  // (Not synchronize(): a bad index found meanwhile is the step's error, raised at its sync.)
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream()));
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()));
  FLAXPP_CUDA_CHECK(cudaDeviceGraphMemTrim(index_));
  trim_pool();
}

}  // namespace flaxpp::cuda
