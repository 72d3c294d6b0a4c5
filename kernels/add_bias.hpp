// kernels/add_bias.hpp — the launcher of the bias kernel (kernels/add_bias.cu): a product's
// bias added to each of its rows in place, where cuBLASLt's epilogue cannot take it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace flaxpp::kernels {

// out[r * n + j] = out[r * n + j] + bias[j] for r < rows, j < n (elementwise.hpp's Add), on
// `stream`. Returns the launch's error.
cudaError_t launch_add_bias(float* out, const float* bias, std::int64_t rows, std::int64_t n,
                            cudaStream_t stream);
cudaError_t launch_add_bias(double* out, const double* bias, std::int64_t rows, std::int64_t n,
                            cudaStream_t stream);

}  // namespace flaxpp::kernels
