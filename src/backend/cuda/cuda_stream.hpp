// A CUDA stream the backend owns: non-blocking (it does not wait for the legacy default
// stream), made on the current device, destroyed with its owner.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>

#include "backend/cuda/cuda_check.hpp"

namespace flaxpp::cuda {

class Stream {
 public:
  Stream() { FLAXPP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  // Destructors never throw: a failure is reported and cleared.
  ~Stream() {
    if (cudaStreamDestroy(stream_) != cudaSuccess) {
      std::fprintf(stderr, "flaxpp: cudaStreamDestroy failed: %s\n",
                   cudaGetErrorString(cudaGetLastError()));
    }
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace flaxpp::cuda
