// The reference problems' transformer Block, line for line as its Flax definition.
#include "flaxpp/nn/transformer_block.hpp"

#include "flaxpp/nn/dense.hpp"
#include "flaxpp/nn/layer_norm.hpp"
#include "flaxpp/nn/multi_head_attention.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::nn {

Array TransformerBlock::operator()(Scope& s, const Array& x) const {
  if (x.rank() != 3)
    throw ValueError(
        detail::str("Block at ", s.path_str(), ": x must be (B, T, D), got ", x.aval()));
  if (mlp_dim <= 0)
    throw ValueError(
        detail::str("Block at ", s.path_str(), ": mlp_dim must be > 0, got ", mlp_dim));
  // nn.make_causal_mask(jnp.ones(x.shape[:-1], jnp.int32)): only the shape is read. Decoding
  // one position, it is all ones, and the attention's cache masks the positions (Flax's lm1b
  // passes no mask when decoding).
  const Array mask = decode && x.shape()[1] == 1
                         ? Array()
                         : make_causal_mask(zeros(Shape{x.shape()[0], x.shape()[1]}, DType::i32));
  Array h = s(LayerNorm{}, x);
  h = s(
      MultiHeadDotProductAttention{
          .num_heads = num_heads, .decode = decode, .attention_fn = attention_fn},
      h, AttentionArgs{.mask = mask});
  const Array y = x + h;
  h = s(LayerNorm{}, y);
  h = gelu(s(Dense{.features = mlp_dim}, h));
  h = s(Dense{.features = x.shape()[-1]}, h);
  return y + h;
}

}  // namespace flaxpp::nn
