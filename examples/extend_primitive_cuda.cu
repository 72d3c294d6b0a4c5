// extend_primitive_cuda.cu — the CUDA kernel of examples/extend_primitive.cpp's squareplus
// primitive: a grid-stride loop applying the shared functor, queued on flaxpp's stream of the
// array's GPU, registered for DeviceKind::cuda.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "squareplus.hpp"

using namespace flaxpp;

namespace {

template <class T>
__global__ void squareplus_kernel(const T* x, T* y, std::int64_t n, Squareplus f) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] = f(x[i]);
}

std::vector<Array> squareplus_cuda(const ir::Primitive& /*prim*/, std::span<const Array> in,
                                   const ir::Params& params, std::span<const AVal> out) {
  return evaluate_squareplus(
      in, params, out, []<class T>(T, const Array& x, Buffer& result, Squareplus f) {
        const std::int64_t n = x.size();
        if (n == 0) return;
        const auto stream = static_cast<cudaStream_t>(backend(x.device()).stream_handle());
        const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((n + 255) / 256, 4096));
        squareplus_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<const T*>(x.buffer().data()),
                                                         static_cast<T*>(result.data()), n, f);
        if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
          throw DeviceError(std::string("squareplus kernel: ") + cudaGetErrorString(e));
      });
}

}  // namespace

void register_squareplus_cuda(const ir::Primitive& squareplus) {
  ir::register_impl(squareplus, DeviceKind::cuda, squareplus_cuda);
}
