// flaxpp/ops/dot_product_attention.hpp — jax.nn.dot_product_attention: scaled dot-product
// attention in JAX's BTNH layout, with its bias, mask, scale, is_causal and implementation
// arguments. Not supported: query_seq_lengths, key_value_seq_lengths, local_window_size,
// return_residual.
#pragma once

#include <optional>
#include <string>

#include "flaxpp/core/array.hpp"

namespace flaxpp {

// jax.nn.dot_product_attention's keyword arguments. An invalid (default) Array is None.
struct DotProductAttentionOptions {
  Array bias{};  // added to the logits; broadcastable to (B, N, T, S), rank 4 (or less: padded)
  Array mask{};  // bool, true where a query attends to a key; the bias's shape rule
  std::optional<double> scale{};  // none: 1 / sqrt(H)
  bool is_causal = false;         // query t attends to keys 0..t only
  // none: flaxpp's fused attention (lax::dot_product_attention_p): XLA's arithmetic, a tile of
  //   scores per head at a time on the CPU (online softmax), so its sums run in another order
  //   than "xla"'s. On CUDA it is cuDNN's fused attention (flash attention, forward and
  //   backward) for float16 and bfloat16 operands without a bias or mask, in builds with
  //   cuDNN's frontend; other operands run the unfused arithmetic, said once on stderr.
  // "xla": XLA's arithmetic composed of primitives as JAX composes it (the (B, N, T, S) logits
  //   materialised): JAX's values and residuals.
  // "cudnn": the same primitive, with a ValueError unless cuDNN's fused attention takes the
  //   operands: float16 or bfloat16, no bias or mask, on a GPU, in a build with cuDNN's
  //   frontend. A configuration cuDNN itself rejects is said once and runs unfused.
  std::optional<std::string> implementation{};
};

// query (B, T, N, H), key and value (B, S, K, H) with N a multiple of K (grouped-query
// attention: query head n reads key/value head n / (N / K)), or all three without the batch
// axis; the result has query's shape: softmax(query . key * scale + bias, masked) . value per
// head, the softmax in float32, masked logits -0.7 * float32's max. Bad shapes and dtypes are
// ValueErrors in JAX's words.
Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const DotProductAttentionOptions& options = {});

}  // namespace flaxpp
