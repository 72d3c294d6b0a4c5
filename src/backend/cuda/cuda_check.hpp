// Checked CUDA runtime and cuBLAS calls: every call goes through FLAXPP_CUDA_CHECK or
// FLAXPP_CUBLAS_CHECK, which throw a DeviceError naming the call, the error and where.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "flaxpp/core/error.hpp"

namespace flaxpp::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file,
                                          int line) {
  throw DeviceError(detail::str("CUDA error ", cudaGetErrorName(err), " (", cudaGetErrorString(err),
                                ") in ", call, " at ", file, ":", line));
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call,
                                            const char* file, int line) {
  throw DeviceError(detail::str("cuBLAS error ", cublasGetStatusName(status), " (",
                                cublasGetStatusString(status), ") in ", call, " at ", file, ":",
                                line));
}

}  // namespace flaxpp::cuda

#define FLAXPP_CUDA_CHECK(call)                                                      \
  do {                                                                               \
    const cudaError_t flaxpp_cuda_err_ = (call);                                     \
    if (flaxpp_cuda_err_ != cudaSuccess)                                             \
      ::flaxpp::cuda::throw_cuda_error(flaxpp_cuda_err_, #call, __FILE__, __LINE__); \
  } while (false)

#define FLAXPP_CUBLAS_CHECK(call)                                                           \
  do {                                                                                      \
    const cublasStatus_t flaxpp_cublas_status_ = (call);                                    \
    if (flaxpp_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                     \
      ::flaxpp::cuda::throw_cublas_error(flaxpp_cublas_status_, #call, __FILE__, __LINE__); \
  } while (false)
