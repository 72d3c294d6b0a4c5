// kernels/random_kernels.cuh — the key primitives on the GPU: each thread writes words of the
// result from the key's two words, read on the device (a traced key never visits the host, so
// steps that draw record into CUDA graphs).
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"
#include "threefry.hpp"

namespace flaxpp::kernels {

__global__ void random_words_kernel(const std::uint32_t* key, RandomWords words, std::uint32_t* out,
                                    std::int64_t n) {
  const std::uint32_t k0 = key[0], k1 = key[1];
  for (std::int64_t i = grid_index(); i < n; i += grid_stride())
    out[i] = words(k0, k1, static_cast<std::uint64_t>(i));
}

inline cudaError_t launch_random_words(const std::uint32_t* key, const RandomWords& words,
                                       std::uint32_t* out, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  random_words_kernel<<<grid_blocks(n), kBlockThreads, 0, stream>>>(key, words, out, n);
  return cudaGetLastError();
}

}  // namespace flaxpp::kernels
