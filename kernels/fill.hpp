// kernels/fill.hpp — the launcher of the fill kernel (kernels/fill.cu): Array::full and zeros
// on a GPU are one kernel, not a host array uploaded.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace flaxpp::kernels {

// Writes `count` copies of the `itemsize`-byte value at `value` (1, 2, 4 or 8 bytes, read on
// the host now) to device memory `out`, on `stream`. Returns the launch's error.
cudaError_t launch_fill(void* out, const void* value, std::size_t itemsize, std::int64_t count,
                        cudaStream_t stream);

}  // namespace flaxpp::kernels
