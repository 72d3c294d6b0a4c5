// Private to the backends: the words an equation of a key primitive (random_bits,
// random_fold_in, random_split) writes, as kernels/threefry.hpp's RandomWords, from its params.
#pragma once

#include "flaxpp/ir/lax_random.hpp"
#include "kernels/threefry.hpp"

namespace flaxpp::backend_impl {

// `n`: the result's number of words.
inline kernels::RandomWords random_words(const ir::Primitive& prim, const ir::Params& params,
                                         std::int64_t n) {
  using Op = kernels::RandomWords::Op;
  const auto words = static_cast<std::uint64_t>(n);
  if (&prim == &lax::random_fold_in_p)
    return {.op = Op::fold_in,
            .partitionable = true,
            .n = words,
            .data = static_cast<std::uint32_t>(params.get<std::int64_t>("data"))};
  return {.op = &prim == &lax::random_bits_p ? Op::bits : Op::split,
          .partitionable = params.get<bool>("partitionable"),
          .n = words};
}

}  // namespace flaxpp::backend_impl
