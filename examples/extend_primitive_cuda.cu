// extend_primitive_cuda.cu — the CUDA kernel of examples/extend_primitive.cpp's squareplus
// primitive: a grid-stride loop applying the shared functor, queued on flaxpp's stream of the
// array's GPU, registered for DeviceKind::cuda.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include <flaxpp/core/array.hpp>
#include <flaxpp/core/backend.hpp>
#include <flaxpp/core/error.hpp>
#include <flaxpp/ir/primitive.hpp>

#include "squareplus.hpp"

using namespace flaxpp;

namespace {

template <class T>
__global__ void squareplus_kernel(const T* x, T* y, std::int64_t n, Squareplus f) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] = f(x[i]);
}

template <class T>
void launch(const Array& x, const Buffer& out, Squareplus f) {
  const std::int64_t n = x.size();
  if (n == 0) return;
  const auto stream = static_cast<cudaStream_t>(backend(x.device()).stream_handle());
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((n + 255) / 256, 4096));
  squareplus_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<const T*>(x.buffer().data()),
                                                   static_cast<T*>(out.data()), n, f);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    throw DeviceError(std::string("squareplus kernel: ") + cudaGetErrorString(e));
}

std::vector<Array> squareplus_cuda(const ir::Primitive& /*prim*/, std::span<const Array> in,
                                   const ir::Params& params, std::span<const AVal> out) {
  const Array& x = in[0];
  const std::shared_ptr<Buffer> buffer = backend(x.device()).allocate(x.nbytes());
  const Squareplus f{params.get<double>("b")};
  if (x.dtype() == DType::f32) {
    launch<float>(x, *buffer, f);
  } else {
    launch<double>(x, *buffer, f);
  }
  return {Array(buffer, out[0].shape, out[0].dtype)};
}

}  // namespace

void register_squareplus_cuda(const ir::Primitive& squareplus) {
  ir::register_impl(squareplus, DeviceKind::cuda, squareplus_cuda);
}
