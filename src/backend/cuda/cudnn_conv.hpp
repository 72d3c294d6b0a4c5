// cuDNN's convolutions through its graph API (cudnn_graph.hpp's plumbing) for the CUDA
// backend's conv_general_dilated: the forward, backward data and backward filter operations,
// on the passes backend_impl::as_library_conv recognises. The pass returns false where cuDNN is
// not built in, not usable on this GPU, or rejects the configuration (reported once on stderr
// with cuDNN's reason); the caller then runs flaxpp's direct kernel. Plans are built once per
// configuration and reused (cudnn::PlanCache). float32 data is convolved in true float32:
// engines that would use TF32 tensor cores are skipped.
#pragma once

#include <cstdint>

#include "backend/conv_library.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "flaxpp/core/dtype.hpp"

namespace flaxpp::cuda {

// The pass `conv` describes on arrays of `dtype` (f32, bf16 or f16; float32 accumulation) on
// `gpu`: lhs and rhs the equation's operands, out its result. Not where conv.x_shrunk (a view
// of x that cuDNN's packed layouts do not describe).
bool cudnn_conv(CudaBackend& gpu, DType dtype, const backend_impl::LibraryConv& conv,
                const void* lhs, const void* rhs, void* out);

// cudnn_conv_executions() is declared in cuda_eval.hpp, for the tests.

}  // namespace flaxpp::cuda
