// flaxpp/kernels/hd.hpp — FLAXPP_HD marks math that runs on both host and device: __host__
// __device__ under nvcc, nothing under a plain C++ compiler (so the CPU build needs no CUDA).
#ifndef FLAXPP_KERNELS_HD_HPP
#define FLAXPP_KERNELS_HD_HPP

#if defined(__CUDACC__)
#define FLAXPP_HD __host__ __device__ __forceinline__
#else
#define FLAXPP_HD inline
#endif

#endif  // FLAXPP_KERNELS_HD_HPP
