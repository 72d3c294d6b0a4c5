// kernels/fused_elementwise_kernel.cuh — the CUDA kernel of fused_elementwise: every element of
// every group of one launch runs the program (kernels/elementwise_program.hpp's functors, the
// CPU's code) in a grid-stride loop over the groups' concatenated elements. The program, the
// scalars' addresses and the groups' pointers travel in the kernel's parameters (no table to
// upload, nothing to wait for), so one launch covers a whole optimiser update of one dtype.
#pragma once

#include <cstdint>

#include "cuda_launch.cuh"
#include "elementwise_program.hpp"

namespace flaxpp::kernels {

// Limits of one launch: the host splits more groups into several launches, and a longer
// program (or one with more 0-d operands) into stages (ir::split_program). The parameter block
// stays under the 32 KiB that CUDA 12.1+ allows kernels on Volta and newer.
inline constexpr int kFusedMaxCode = 256;
inline constexpr int kFusedMaxScalars = 16;
inline constexpr int kFusedMaxGroups = 192;
inline constexpr int kFusedMaxPointers = 1024;  // inputs (and outputs) of all groups

template <class S>
struct FusedLaunch {
  using C = compute_t<S>;
  ProgramInstr code[kFusedMaxCode];
  C constants[kProgramRegisters];
  const S* scalars[kFusedMaxScalars];
  std::uint8_t outputs[kProgramRegisters];
  int num_code, num_scalars, num_inputs, num_constants, num_outputs, num_groups;
  std::uint32_t masks;  // bit k: input k is a bool array (its pointer holds bytes), read as 1 or 0
  // Input k read as a broadcast where inner[k] > 0: element i reads its element
  // (i / inner[k]) % size[k]. A launch with broadcasts holds one group.
  std::int64_t inner[kProgramRegisters];
  std::int64_t size[kProgramRegisters];
  std::int64_t offsets[kFusedMaxGroups + 1];  // group g's elements are [offsets[g], offsets[g+1])
  const S* in[kFusedMaxPointers];             // group g's inputs at g * num_inputs
  S* out[kFusedMaxPointers];                  // group g's outputs at g * num_outputs
};

// A computed value as the arrays' dtype holds it: 16-bit floats round (as a lone primitive
// stores its result), float32 and float64 are exact already.
template <class S, class C>
__device__ __forceinline__ C round_to_storage(C v) {
  if constexpr (is_half_v<S>) {
    return static_cast<C>(store_as<S>(v));
  } else {
    return v;
  }
}

template <class S>
__global__ void fused_elementwise_kernel(const __grid_constant__ FusedLaunch<S> p) {
  using C = compute_t<S>;
  C r[kProgramRegisters];
  for (int s = 0; s < p.num_scalars; ++s)
    r[s] = static_cast<C>(p.scalars[s][0]);
  const int first_constant = p.num_scalars + p.num_inputs;
  for (int c = 0; c < p.num_constants; ++c)
    r[first_constant + c] = p.constants[c];
  const std::int64_t total = p.offsets[p.num_groups];
  int g = 0;
  for (std::int64_t e = grid_index(); e < total; e += grid_stride()) {
    while (e >= p.offsets[g + 1])
      ++g;  // the stride only moves forward, so the group does too
    const std::int64_t i = e - p.offsets[g];
    for (int k = 0; k < p.num_inputs; ++k) {
      const S* in = p.in[g * p.num_inputs + k];
      const std::int64_t at = p.inner[k] == 0 ? i : (i / p.inner[k]) % p.size[k];
      r[p.num_scalars + k] =
          (p.masks >> k & 1u) != 0
              ? (reinterpret_cast<const std::uint8_t*>(in)[at] != 0 ? C(1) : C(0))
              : static_cast<C>(in[at]);
    }
    for (int k = 0; k < p.num_code; ++k) {
      const ProgramInstr& in = p.code[k];
      visit_instr(in.op, in.y,
                  [&](auto f) { r[in.dst] = round_to_storage<S>(f(r[in.a], r[in.b], r[in.c])); });
    }
    for (int k = 0; k < p.num_outputs; ++k)
      p.out[g * p.num_outputs + k][i] = store_as<S>(r[p.outputs[k]]);
  }
}

// The groups of `p` (p.num_groups of them) in one launch. Returns the launch's error.
template <class S>
cudaError_t launch_fused_elementwise(const FusedLaunch<S>& p, cudaStream_t stream) {
  const std::int64_t n = p.num_groups > 0 ? p.offsets[p.num_groups] : 0;
  if (n == 0) return cudaSuccess;
  fused_elementwise_kernel<S><<<grid_blocks(n), kBlockThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace flaxpp::kernels
