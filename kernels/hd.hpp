// kernels/hd.hpp — FLAXPP_HD marks math that runs on both host and device: __host__
// __device__ under nvcc, nothing under a plain C++ compiler (so the CPU build needs no CUDA).
#pragma once

#if defined(__CUDACC__)
#define FLAXPP_HD __host__ __device__ __forceinline__
#else
#define FLAXPP_HD inline
#endif
