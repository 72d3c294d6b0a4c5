// cuDNN's LayerNorm through its graph API (backend descriptors, no frontend header library),
// for the CUDA backend's layer_norm primitives. Every entry point returns false where cuDNN is
// not built in, not usable on this GPU, or rejects the configuration; the caller then runs
// flaxpp's own kernel. A rejection is reported once per configuration on stderr, with cuDNN's
// reason. Execution plans are built once per (dtype, rows, features) and reused (the 64 most
// recent). Where cuDNN takes the parameters (scale, bias and their gradients) only in float32,
// the plan is built so and the caller's ParamsAsFloat makes float32 copies of scale and bias.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "backend/cuda/cuda_backend.hpp"
#include "flaxpp/core/dtype.hpp"

namespace flaxpp::cuda {

// A float32 copy, on the GPU, of a parameter vector (f elements of x's dtype) at `param`,
// ready for work queued after it.
using ParamsAsFloat = std::function<std::shared_ptr<Buffer>(const void* param)>;

// Whether cuDNN may take this configuration (forward or backward): the build has cuDNN, it
// could start on `gpu`'s device, and it has not rejected the configuration before. Callers
// skip preparing cuDNN's inputs when it is false.
bool cudnn_layer_norm_usable(CudaBackend& gpu, bool forward, DType dtype, std::int64_t rows,
                             std::int64_t f);
// cudnn_layer_norm_executions() is declared in cuda_eval.hpp, for the tests.

// y = LayerNorm(x) over the last axis of x (rows, f), with scale and bias (f,) of x's dtype
// (f32, bf16 or f16); mean and inv_var receive the row statistics (float32, rows each).
bool cudnn_layer_norm_forward(CudaBackend& gpu, DType dtype, std::int64_t rows, std::int64_t f,
                              const void* x, const void* scale, const void* bias, double epsilon,
                              void* y, void* mean, void* inv_var, const ParamsAsFloat& as_float);

// dx of LayerNorm for dy, from the row statistics (float32 mean and inverse standard
// deviation); dscale and dbias (room for f float32 elements each) receive cuDNN's parameter
// gradients.
bool cudnn_layer_norm_dx(CudaBackend& gpu, DType dtype, std::int64_t rows, std::int64_t f,
                         const void* x, const void* scale, const void* dy, const void* mean,
                         const void* inv_var, void* dx, void* dscale, void* dbias,
                         const ParamsAsFloat& as_float);

}  // namespace flaxpp::cuda
