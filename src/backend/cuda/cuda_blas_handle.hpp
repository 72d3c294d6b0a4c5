// A device's cuBLAS handle, bound to the backend's stream with a workspace of its own, made on
// first use (cublasCreate and cudaMalloc cannot be recorded into a CUDA graph, so the first
// product runs eagerly) and destroyed with its owner.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <mutex>

namespace flaxpp::cuda {

class BlasHandle {
 public:
  // cuBLAS's workspace, one per handle, set before any recording so that eager and recorded
  // products see the same configuration (desk review F4). Not counted in memory_stats().
  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

  BlasHandle(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  ~BlasHandle();
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;

  // The handle, made by the first call, after `before_making` (which may throw, e.g. inside a
  // recording; the next call tries again).
  cublasHandle_t get(const std::function<void()>& before_making);
  // The workspace get() set, which cuBLASLt calls take explicitly; nullptr before get().
  void* workspace() const { return workspace_; }

 private:
  int device_;
  cudaStream_t stream_;
  std::once_flag made_;
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace flaxpp::cuda
