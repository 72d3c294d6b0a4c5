// kernels/cuda_error_text.hpp — "CUDA error <name> (<description>)", as every flaxpp message
// about a CUDA runtime error words it: the CUDA backend's checks (backend/cuda/cuda_check.hpp)
// and the NCCL communicator's, which lies in a layer that may not include the backend's
// headers. No framework headers.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace flaxpp::kernels {

inline std::string cuda_error_text(cudaError_t err) {
  return std::string("CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

}  // namespace flaxpp::kernels
