// Checked CUDA runtime and cuBLAS calls: every call goes through FLAXPP_CUDA_CHECK or
// FLAXPP_CUBLAS_CHECK, which throw a DeviceError naming the call, the error and where.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "flaxpp/core/error.hpp"
#include "kernels/cuda_error_text.hpp"

namespace flaxpp::cuda {

using kernels::cuda_error_text;

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file,
                                          int line) {
  throw DeviceError(detail::str(cuda_error_text(err), " in ", call, " at ", file, ":", line));
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call,
                                            const char* file, int line) {
  throw DeviceError(detail::str("cuBLAS error ", cublasGetStatusName(status), " (",
                                cublasGetStatusString(status), ") in ", call, " at ", file, ":",
                                line));
}

}  // namespace flaxpp::cuda

// Throws through `thrower` (status, call, file, line) when `call` returns other than `ok`.
#define FLAXPP_STATUS_CHECK(call, ok, thrower)                                      \
  do {                                                                              \
    const auto flaxpp_status_ = (call);                                             \
    if (flaxpp_status_ != (ok)) thrower(flaxpp_status_, #call, __FILE__, __LINE__); \
  } while (false)
#define FLAXPP_CUDA_CHECK(call) \
  FLAXPP_STATUS_CHECK(call, cudaSuccess, ::flaxpp::cuda::throw_cuda_error)
#define FLAXPP_CUBLAS_CHECK(call) \
  FLAXPP_STATUS_CHECK(call, CUBLAS_STATUS_SUCCESS, ::flaxpp::cuda::throw_cublas_error)
