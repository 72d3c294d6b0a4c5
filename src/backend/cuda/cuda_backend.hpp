// The CUDA backend's memory: device buffers from the stream-ordered allocator (a
// cudaMemPool per device, cudaMallocAsync on the backend's stream), pinned host buffers for
// offloaded residuals (cudaMallocHost). Never managed memory. Primitives run on the same
// stream (cuda_eval.hpp), so stream order alone makes allocation, compute and free safe.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <mutex>

#include "flaxpp/core/backend.hpp"

namespace flaxpp::cuda {

// Number of CUDA devices the runtime sees (0 when there is no driver or no GPU).
int device_count() noexcept;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index);
  ~CudaBackend() override;

  cudaStream_t stream() const { return stream_; }
  void synchronize() const override;
  // This device's cuBLAS handle, bound to stream(); created on first use.
  cublasHandle_t blas();
  // High-water mark of the pool's used memory since the last reset_pool_peak(), as the
  // driver reports it (cudaMemPoolAttrUsedMemHigh): allocator rounding included.
  std::int64_t pool_used_high() const;
  void reset_pool_peak();

 protected:
  void* allocate_impl(std::int64_t bytes, MemoryKind kind) override;
  void deallocate_impl(void* data, std::int64_t bytes, MemoryKind kind) noexcept override;
  void copy_to_host_impl(const void* src, void* dst, std::int64_t bytes) const override;
  void copy_from_host_impl(const void* src, void* dst, std::int64_t bytes) const override;
  void copy_impl(const void* src, void* dst, std::int64_t bytes) const override;

 private:
  int index_;
  cudaStream_t stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  std::once_flag blas_once_;
  cublasHandle_t blas_ = nullptr;
};

}  // namespace flaxpp::cuda
