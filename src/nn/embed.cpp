// nn.Embed: the table is one parameter ("embedding", drawn once per scope, as Flax makes it in
// setup()); __call__ is a take of its rows, attend a product with its transpose.
#include "flaxpp/nn/embed.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::nn {

initializers::Initializer default_embed_init() {
  return initializers::variance_scaling(1.0, initializers::FanMode::fan_in,
                                        initializers::Distribution::normal, {-2}, {0});
}

Array Embed::embedding(Scope& s) const {
  if (num_embeddings <= 0 || features <= 0)
    throw ValueError(detail::str("Embed at ", s.path_str(),
                                 ": num_embeddings and features must be > 0, got ", num_embeddings,
                                 " and ", features));
  return s.param_once("embedding", embedding_init, Shape{num_embeddings, features}, param_dtype);
}

Array Embed::operator()(Scope& s, const Array& tokens) const {
  if (tokens.dtype() != DType::i32 && tokens.dtype() != DType::u32)
    throw ValueError(detail::str("Embed at ", s.path_str(),
                                 ": token ids must be int32 or uint32, got ", tokens.aval(),
                                 "; convert them with astype(tokens, DType::i32)"));
  const Array table = embedding(s);
  // uint32 ids of 2^31 and more become negative int32, which the range check refuses.
  const Array ids = astype(tokens, DType::i32);
  if (!ids.is_traced())
    lax::checked_indices(ids, num_embeddings,
                         detail::str("Embed at ", s.path_str(), " (num_embeddings ", num_embeddings,
                                     "): token ids"));
  // Flax's promote_dtype(embedding, dtype=self.dtype, inexact=False): the table's dtype unless
  // dtype is given. (For num_embeddings == 1 Flax broadcasts the one row, which is what take
  // gives for the only valid id, 0.)
  return lax::take(astype(table, dtype.value_or(param_dtype)), ids);
}

Array Embed::attend(Scope& s, const Array& query) const {
  const Array table = embedding(s);
  if (query.rank() == 0 || query.shape()[-1] != features)
    throw ValueError(detail::str("Embed.attend at ", s.path_str(),
                                 ": the query's last axis must be ", features,
                                 " (the features), got ", query.aval()));
  // promote_dtype(query, embedding, dtype=self.dtype), then jnp.dot(query, embedding.T).
  const DType compute = dtype.value_or(query.dtype() == param_dtype ? query.dtype() : DType::f32);
  const Array table_t = lax::transpose(astype(table, compute), {1, 0});
  return lax::dot_general(astype(query, compute), table_t, {{query.rank() - 1}, {0}, {}, {}});
}

EmbedAttend Embed::attending() const {
  return EmbedAttend{*this};
}

}  // namespace flaxpp::nn
