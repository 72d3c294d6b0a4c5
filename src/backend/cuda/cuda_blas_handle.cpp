// The cuBLAS handle of a device (cuda_blas_handle.hpp).
#include "backend/cuda/cuda_blas_handle.hpp"

#include <cstdio>

#include "backend/cuda/cuda_check.hpp"

namespace flaxpp::cuda {

BlasHandle::~BlasHandle() {
  // Destructors never throw: report and go on.
  if (handle_ != nullptr && cublasDestroy(handle_) != CUBLAS_STATUS_SUCCESS)
    std::fprintf(stderr, "flaxpp: cublasDestroy failed on cuda:%d\n", device_);
  if (workspace_ != nullptr) (void)cudaFree(workspace_);
}

cublasHandle_t BlasHandle::get(const std::function<void()>& before_making) {
  std::call_once(made_, [&] {
    before_making();
    FLAXPP_CUDA_CHECK(cudaSetDevice(device_));
    void* workspace = nullptr;
    FLAXPP_CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
    cublasHandle_t handle = nullptr;
    cublasStatus_t status = cublasCreate(&handle);
    const char* call = "cublasCreate";
    // cublasSetStream resets the workspace to cuBLAS's own: the workspace is set after it.
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasSetStream(handle, stream_);
      call = "cublasSetStream";
    }
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasSetWorkspace(handle, workspace, kWorkspaceBytes);
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
    workspace_ = workspace;
    handle_ = handle;
  });
  return handle_;
}

}  // namespace flaxpp::cuda
