// The reference problems' Stack and LM, line for line as their Flax definitions.
#include "flaxpp/nn/language_model.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/nn/dense.hpp"
#include "flaxpp/nn/embed.hpp"
#include "flaxpp/nn/layer_norm.hpp"
#include "flaxpp/nn/remat.hpp"
#include "flaxpp/nn/scan.hpp"
#include "flaxpp/nn/transformer_block.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/ops/slicing.hpp"

namespace flaxpp::nn {

Array TransformerStack::operator()(Scope& s, const Array& x) const {
  const TransformerBlock block{
      .num_heads = num_heads, .mlp_dim = mlp_dim, .decode = decode, .attention_fn = attention_fn};
  ScanOptions options{.length = num_layers};
  if (decode) options.variable_axes.push_back("cache");
  return s(scan(remat<TransformerBlock>(policy, {}, false)(block), options), x);
}

Array LanguageModel::operator()(Scope& s, const Array& tokens) const {
  if (tokens.rank() != 2 || tokens.dtype() != DType::i32)
    throw ValueError(
        detail::str("LM at ", s.path_str(), ": tokens must be int32 (B, T), got ", tokens.aval()));
  const std::int64_t T = tokens.shape()[1];
  if (T > max_len)
    throw ValueError(detail::str("LM at ", s.path_str(), ": a sequence of ", T,
                                 " tokens is longer than max_len ", max_len,
                                 " (the positions the model has embeddings for); cut it to ",
                                 max_len, " tokens or make a model with a larger max_len"));
  Array x = s(Embed{.num_embeddings = vocab, .features = features}, tokens);
  const Array pos = s.param("pos_embedding", initializers::normal(0.02), Shape{max_len, features});
  // Decoding after init: the one token's position is the cache's index.
  const bool decoding = decode && s.has_variable("cache", "cache_index");
  if (decode) {
    const Array index = s.variable("cache", "cache_index", [] { return zeros({}, DType::i32); });
    if (decoding) {
      if (T != 1)
        throw ValueError(detail::str("LM at ", s.path_str(),
                                     ": with decode, apply takes one token "
                                     "per sequence (B, 1) after init, got tokens ",
                                     tokens.aval(), "; feed a sequence one token at a time"));
      s.put_variable("cache", "cache_index", index + 1.0);
      const Array starts[] = {index, zeros({}, DType::i32)};
      x = x + lax::dynamic_slice(pos, starts, {1, features});  // pos[index]
    }
  }
  if (!decoding) x = x + slice(pos, {{0, T}});  // pos[:T]
  x = s(TransformerStack{num_layers, num_heads, mlp_dim, policy, decode, attention_fn}, x);
  return s(Dense{.features = vocab}, s(LayerNorm{}, x));
}

}  // namespace flaxpp::nn
