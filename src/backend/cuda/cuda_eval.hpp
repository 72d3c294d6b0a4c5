// Eager evaluation of the lax primitives on a CUDA device: cuBLAS for dot_general, flaxpp's
// kernels (kernels/*.cuh) for everything else. Inputs are concrete arrays on that device;
// kernels are queued on the device backend's stream, which orders them with its allocations
// and frees, and results are ready whenever a copy to the host reads them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/aval.hpp"
#include "flaxpp/ir/params.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::cuda {

// Computes `prim` on `inputs` (arrays on one CUDA device, accepted by the shape rule;
// `out_avals` is its result) into new arrays on that device. Throws ValueError for a
// primitive or dtype the CUDA backend does not implement, naming both.
std::vector<Array> eval(const ir::Primitive& prim, std::span<const Array> inputs,
                        const ir::Params& params, std::span<const AVal> out_avals);

// Whether the layer_norm primitives (bf16/f16), the convolutions and the attention (bf16/f16)
// may use cuDNN (default
// true; tests turn it off to run flaxpp's own kernels on a machine where cuDNN works).
void set_use_cudnn(bool use);
bool cudnn_allowed();
// How many LayerNorm plans cuDNN has executed in this process (0 in builds without cuDNN).
std::int64_t cudnn_layer_norm_executions();
// How many convolution plans cuDNN has executed in this process (0 in builds without cuDNN).
std::int64_t cudnn_conv_executions();
// How many attention graphs (forward or backward) cuDNN has executed in this process (0 in
// builds without cuDNN's frontend).
std::int64_t cudnn_attention_executions();
// Whether this build has cuDNN (FLAXPP_WITH_CUDNN).
bool cudnn_built();
// The memory of CUDA device `device` in bytes.
std::int64_t device_memory_bytes(Device device);

}  // namespace flaxpp::cuda
