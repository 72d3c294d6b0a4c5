// The key primitives on the CPU: each result word from the key's two words.
#include "backend/cpu/cpu_eval_impl.hpp"
#include "backend/random_words.hpp"

namespace flaxpp::cpu {

Array Families::random_words(const ir::Primitive& prim, std::span<const Array> in,
                             const ir::Params& params, const AVal& out) {
  const std::int64_t n = out.shape.size();
  const kernels::RandomWords words = backend_impl::random_words(prim, params, n);
  const std::uint32_t* key = in_data<std::uint32_t>(in[0]);
  const Output o(out);
  auto* ys = o.data<std::uint32_t>();
  for (std::int64_t i = 0; i < n; ++i)
    ys[i] = words(key[0], key[1], static_cast<std::uint64_t>(i));
  return o.array();
}

}  // namespace flaxpp::cpu
