// CUDA backend memory: stream-ordered device allocations from a per-device pool, pinned host
// allocations, and synchronous-to-the-caller copies on the backend's stream.
#include "backend/cuda/cuda_backend.hpp"

#include <cstdint>
#include <cstdio>

#include "backend/cuda/cuda_check.hpp"

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
  FLAXPP_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, index_));
  // Keep freed memory in the pool instead of returning it at every synchronisation: the
  // executor frees and reallocates the same sizes every step.
  std::uint64_t threshold = UINT64_MAX;
  FLAXPP_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold));
}

CudaBackend::~CudaBackend() {
  // Destructors never throw: report and go on.
  if (blas_ != nullptr && cublasDestroy(blas_) != CUBLAS_STATUS_SUCCESS)
    std::fprintf(stderr, "flaxpp: cublasDestroy failed on cuda:%d\n", index_);
  if (stream_ != nullptr && cudaStreamDestroy(stream_) != cudaSuccess)
    std::fprintf(stderr, "flaxpp: cudaStreamDestroy failed on cuda:%d\n", index_);
}

void CudaBackend::synchronize() const {
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

cublasHandle_t CudaBackend::blas() {
  std::call_once(blas_once_, [this] {
    FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
    cublasHandle_t handle = nullptr;
    FLAXPP_CUBLAS_CHECK(cublasCreate(&handle));
    if (const cublasStatus_t status = cublasSetStream(handle, stream_);
        status != CUBLAS_STATUS_SUCCESS) {
      (void)cublasDestroy(handle);
      throw_cublas_error(status, "cublasSetStream", __FILE__, __LINE__);
    }
    blas_ = handle;
  });
  return blas_;
}

void* CudaBackend::allocate_impl(std::int64_t bytes, MemoryKind kind) {
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  void* ptr = nullptr;
  const auto size = static_cast<std::size_t>(bytes == 0 ? 1 : bytes);
  const cudaError_t err = kind == MemoryKind::device
                              ? cudaMallocFromPoolAsync(&ptr, size, pool_, stream_)
                              : cudaMallocHost(&ptr, size);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;  // the base class turns this into an OutOfMemoryError with the stats
  }
  if (err != cudaSuccess) throw_cuda_error(err, "allocate", __FILE__, __LINE__);
  return ptr;
}

void CudaBackend::deallocate_impl(void* data, std::int64_t /*bytes*/, MemoryKind kind) noexcept {
  const cudaError_t err =
      kind == MemoryKind::device ? cudaFreeAsync(data, stream_) : cudaFreeHost(data);
  if (err != cudaSuccess)
    std::fprintf(stderr, "flaxpp: freeing CUDA memory failed: %s\n", cudaGetErrorString(err));
}

void CudaBackend::copy_to_host_impl(const void* src, void* dst, std::int64_t bytes) const {
  FLAXPP_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, static_cast<std::size_t>(bytes), cudaMemcpyDefault, stream_));
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_from_host_impl(const void* src, void* dst, std::int64_t bytes) const {
  FLAXPP_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, static_cast<std::size_t>(bytes), cudaMemcpyDefault, stream_));
  // The source is caller-owned host memory that may be freed once we return.
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_impl(const void* src, void* dst, std::int64_t bytes) const {
  FLAXPP_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, static_cast<std::size_t>(bytes), cudaMemcpyDefault, stream_));
  // Copies complete before returning (Backend's contract): the destination may be pinned host
  // memory that the caller reads next.
  FLAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

std::int64_t CudaBackend::pool_used_high() const {
  std::uint64_t value = 0;
  FLAXPP_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &value));
  return static_cast<std::int64_t>(value);
}

void CudaBackend::reset_pool_peak() {
  std::uint64_t zero = 0;  // the only value the driver accepts: reset to the current usage
  FLAXPP_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
}

}  // namespace flaxpp::cuda
