// Private to the CUDA backend's primitive evaluation: the shared helpers (eval_impl.hpp,
// layout_plan.hpp) on a CUDA device, dtype dispatch including bf16/f16, and the entry points
// of the primitive families in their own files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/eval_impl.hpp"
#include "backend/layout_plan.hpp"
#include "flaxpp/core/array.hpp"

namespace flaxpp::cuda {

using backend_impl::in_data;
using backend_impl::kAll;
using backend_impl::kFloat;
using backend_impl::kHalf;
using backend_impl::kNumeric;
using backend_impl::Output;

// The backend of a CUDA array's device.
CudaBackend& backend_of(const Array& a);

// backend_impl::visit_dtype on `device`, with bf16 and f16 (stored as __nv_bfloat16 and
// __half) when kAllowed includes kHalf.
template <unsigned kAllowed, class R = Array, class F>
R visit_dtype(const ir::Primitive& prim, DType dtype, Device device, F&& f) {
  if constexpr ((kAllowed & kHalf) != 0) {
    if (dtype == DType::bf16) return f(TypeTag<__nv_bfloat16>{});
    if (dtype == DType::f16) return f(TypeTag<__half>{});
  }
  return backend_impl::visit_dtype<kAllowed & ~kHalf, R>(prim, dtype, device, std::forward<F>(f));
}

// Throws DeviceError naming `kernel` when its launch failed (bad configuration, no kernel
// image for this GPU) or an earlier kernel's error is pending. Errors while it runs surface
// at the next synchronisation.
void check_launch(const char* kernel);
// The same for the error a kernels/ launcher returned.
void check_launch(cudaError_t launched, const char* kernel);

// Writes `copy`'s result (row-major) from `in` to `out`, elements of `itemsize` bytes (1, 2,
// 4 or 8), on `stream`.
void gather_strided(const void* in, const backend_impl::StridedCopy& copy, std::size_t itemsize,
                    void* out, cudaStream_t stream);

// The CUDA backend's evaluation families (eval_table.hpp), bf16 and f16 accepted throughout:
// the elementwise ones in cuda_eval.cu, gather in cuda_layout.cu, reductions in cuda_reduce.cu,
// dot_general and dot_general_bias in cuda_dot_general.cpp, LayerNorm in cuda_layer_norm.cu,
// the index primitives in cuda_indexing.cu, pad and concatenate in cuda_slicing.cu, argmax,
// argmin and cumsum in cuda_along_axis.cu, convolutions and windows in cuda_window.cu.
struct Families {
  static constexpr unsigned kNum = kNumeric | kHalf, kFp = kFloat | kHalf, kAny = kAll | kHalf;
  static constexpr const char* kName = "CUDA";
  FLAXPP_EVAL_FAMILIES_MEMBERS;
};

}  // namespace flaxpp::cuda
