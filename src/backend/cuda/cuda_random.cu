// CUDA evaluation of the key primitives (kernels/random_kernels.cuh).
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "backend/random_words.hpp"
#include "kernels/random_kernels.cuh"

namespace flaxpp::cuda {

Array Families::random_words(const ir::Primitive& prim, std::span<const Array> in,
                             const ir::Params& params, const AVal& out) {
  const Device device = in[0].device();
  const Output o(out, device);
  const std::int64_t n = out.shape.size();
  check_launch(kernels::launch_random_words(in_data<std::uint32_t>(in[0]),
                                            backend_impl::random_words(prim, params, n),
                                            o.data<std::uint32_t>(), n, backend_of(in[0]).stream()),
               prim.name().c_str());
  return o.array();
}

}  // namespace flaxpp::cuda
