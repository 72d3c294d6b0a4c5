// Checked CUDA runtime calls: every call goes through FLAXPP_CUDA_CHECK, which throws a
// DeviceError naming the call, the error and where it was made.
#pragma once

#include <cuda_runtime_api.h>

#include "flaxpp/core/error.hpp"

namespace flaxpp::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file,
                                          int line) {
  throw DeviceError(detail::str("CUDA error ", cudaGetErrorName(err), " (", cudaGetErrorString(err),
                                ") in ", call, " at ", file, ":", line));
}

}  // namespace flaxpp::cuda

#define FLAXPP_CUDA_CHECK(call)                                                      \
  do {                                                                               \
    const cudaError_t flaxpp_cuda_err_ = (call);                                     \
    if (flaxpp_cuda_err_ != cudaSuccess)                                             \
      ::flaxpp::cuda::throw_cuda_error(flaxpp_cuda_err_, #call, __FILE__, __LINE__); \
  } while (false)
