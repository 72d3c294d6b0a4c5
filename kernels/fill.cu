// kernels/fill.cu — fills device memory with one repeated 1-, 2-, 4- or 8-byte value: 16-byte
// stores of the value replicated where the destination is aligned, element stores otherwise
// and for the tail.
#include <cstring>

#include "cuda_launch.cuh"
#include "fill.hpp"

namespace flaxpp::kernels {
namespace {

// out[i] = value for i < n; where `vec` is set, the first n_vec 16-byte words of out are
// written whole with `pattern` (value repeated) and only the elements after them one by one.
template <class U>
__global__ void fill_kernel(U value, uint4 pattern, std::int64_t n_vec, U* out, std::int64_t n) {
  uint4* words = reinterpret_cast<uint4*>(out);
  for (std::int64_t i = grid_index(); i < n_vec; i += grid_stride())
    words[i] = pattern;
  constexpr std::int64_t kPerWord = kVecBytes / static_cast<std::int64_t>(sizeof(U));
  for (std::int64_t i = n_vec * kPerWord + grid_index(); i < n; i += grid_stride())
    out[i] = value;
}

template <class U>
cudaError_t launch(void* out, const void* value, std::int64_t count, cudaStream_t stream) {
  U v;
  std::memcpy(&v, value, sizeof v);
  uint4 pattern;
  unsigned char bytes[kVecBytes];
  for (std::size_t i = 0; i < kVecBytes; i += sizeof v)
    std::memcpy(bytes + i, &v, sizeof v);
  std::memcpy(&pattern, bytes, sizeof pattern);
  constexpr std::int64_t kPerWord = kVecBytes / static_cast<std::int64_t>(sizeof(U));
  const std::int64_t n_vec = is_vec_aligned(out) ? count / kPerWord : 0;
  const std::int64_t work = n_vec + (count - n_vec * kPerWord);
  fill_kernel<<<grid_blocks(work), kBlockThreads, 0, stream>>>(v, pattern, n_vec,
                                                               static_cast<U*>(out), count);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_fill(void* out, const void* value, std::size_t itemsize, std::int64_t count,
                        cudaStream_t stream) {
  switch (itemsize) {
    case 1:
      return launch<std::uint8_t>(out, value, count, stream);
    case 2:
      return launch<std::uint16_t>(out, value, count, stream);
    case 4:
      return launch<std::uint32_t>(out, value, count, stream);
    case 8:
      return launch<std::uint64_t>(out, value, count, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace flaxpp::kernels
