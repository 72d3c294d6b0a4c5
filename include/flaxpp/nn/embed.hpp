// flaxpp/nn/embed.hpp — nn.Embed: a (num_embeddings, features) table of learned vectors; token
// ids pick rows, and attend scores queries against every row (weight tying). As
// flax/linen/linear.py, with one difference: ids outside [0, num_embeddings) are an error
// naming the id (Flax returns NaN rows for ids past the end and wraps negative ones).
#pragma once

#include <optional>

#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn {

struct EmbedAttend;

// Flax's default_embed_init: variance_scaling(1.0, "fan_in", "normal", out_axis=0), i.e. a
// normal of stddev 1/sqrt(features) for a (num_embeddings, features) table.
initializers::Initializer default_embed_init();

struct Embed {
  static constexpr const char* name = "Embed";
  std::int64_t num_embeddings = 0;
  std::int64_t features = 0;
  std::optional<DType> dtype{};  // the embedding's computation dtype; none: param_dtype
  DType param_dtype = DType::f32;
  initializers::Initializer embedding_init = default_embed_init();

  // tokens int32 or uint32 (...) -> the rows (..., features): jnp.take(embedding, tokens,
  // axis=0). Concrete tokens are checked here (the error names the module); traced ones when
  // the take runs.
  Array operator()(Scope& s, const Array& tokens) const;
  // query (..., features) -> (..., num_embeddings): query @ embedding.T. Called in the scope of
  // the Embed it ties to (the same table), e.g. s.call("Embed_0", embed.attending(), h).
  Array attend(Scope& s, const Array& query) const;
  // This Embed as a module whose call is attend, for Scope::call.
  EmbedAttend attending() const;

 private:
  Array embedding(Scope& s) const;
};

// An Embed whose call is attend (Embed::attending).
struct EmbedAttend {
  static constexpr const char* name = "Embed";
  Embed embed;
  Array operator()(Scope& s, const Array& query) const { return embed.attend(s, query); }
};

}  // namespace flaxpp::nn
