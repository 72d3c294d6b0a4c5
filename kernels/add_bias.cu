// kernels/add_bias.cu — a bias added to the rows of a row-major matrix in place: one thread per
// element in a grid-stride loop, the column from a 64-bit division by the row length.
#include "add_bias.hpp"
#include "cuda_launch.cuh"
#include "flaxpp/kernels/elementwise.hpp"

namespace flaxpp::kernels {
namespace {

template <class T>
__global__ void add_bias_kernel(T* out, const T* bias, std::int64_t total, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < total; i += grid_stride())
    out[i] = Add{}(out[i], bias[i % n]);
}

template <class T>
cudaError_t launch(T* out, const T* bias, std::int64_t rows, std::int64_t n, cudaStream_t stream) {
  const std::int64_t total = rows * n;
  if (total == 0) return cudaSuccess;
  add_bias_kernel<T><<<grid_blocks(total), kBlockThreads, 0, stream>>>(out, bias, total, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_add_bias(float* out, const float* bias, std::int64_t rows, std::int64_t n,
                            cudaStream_t stream) {
  return launch(out, bias, rows, n, stream);
}
cudaError_t launch_add_bias(double* out, const double* bias, std::int64_t rows, std::int64_t n,
                            cudaStream_t stream) {
  return launch(out, bias, rows, n, stream);
}

}  // namespace flaxpp::kernels
