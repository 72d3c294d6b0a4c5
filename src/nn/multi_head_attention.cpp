// nn.MultiHeadDotProductAttention, as flax/linen/attention.py: the projections, the dropout key
// drawn after them (make_rng("dropout") in this module's scope), dot_product_attention, the
// output projection; with decode, the autoregressive cache.
#include "flaxpp/nn/multi_head_attention.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/nn/dense_general.hpp"
#include "flaxpp/nn/layer_norm.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::nn {

Array MultiHeadDotProductAttention::operator()(Scope& s, const Array& inputs_q,
                                               const AttentionArgs& args) const {
  auto fail = [&](const std::string& what) {
    throw ValueError(detail::str("MultiHeadDotProductAttention at ", s.path_str(), ": ", what));
  };
  if (inputs_q.rank() < 2)
    fail(detail::str("inputs_q must be (batch..., length, features), got ", inputs_q.aval()));
  if (args.inputs_v.valid() && !args.inputs_k.valid())
    fail(
        "inputs_k cannot be None if inputs_v is given; pass the same array to inputs_k for "
        "shared keys and values");
  const Array& inputs_k = args.inputs_k.valid() ? args.inputs_k : inputs_q;
  const Array& inputs_v = args.inputs_v.valid() ? args.inputs_v : inputs_k;
  const std::int64_t features = out_features.value_or(inputs_q.shape()[-1]);
  const std::int64_t qkv = qkv_features.value_or(inputs_q.shape()[-1]);
  if (num_heads <= 0 || qkv % num_heads != 0)
    fail(detail::str("num_heads (", num_heads, ") must be > 0 and divide the qkv features (", qkv,
                     "); choose a head count that divides ", qkv, " or set qkv_features"));
  const std::int64_t head_dim = qkv / num_heads;
  const DenseGeneral dense{.features = {num_heads, head_dim},
                           .axis = {-1},
                           .use_bias = use_bias,
                           .dtype = dtype,
                           .param_dtype = param_dtype,
                           .kernel_init = kernel_init,
                           .bias_init = bias_init};
  Array query = s.call("query", dense, inputs_q);
  Array key = s.call("key", dense, inputs_k);
  Array value = s.call("value", dense, inputs_v);
  if (normalize_qk) {
    const LayerNorm ln{.use_bias = false, .param_dtype = param_dtype};
    query = s.call("query_ln", ln, query);
    key = s.call("key_ln", ln, key);
  }

  Array mask = args.mask;
  if (decode) {
    // Flax: the cache exists once init has made it (from the full-length keys); after that,
    // every call feeds one position.
    const bool initialized = s.has_variable("cache", "cached_key");
    const Array cached_key =
        s.variable("cache", "cached_key", [&] { return zeros(key.shape(), key.dtype()); });
    const Array cached_value =
        s.variable("cache", "cached_value", [&] { return zeros(value.shape(), value.dtype()); });
    const Array cache_index =
        s.variable("cache", "cache_index", [] { return zeros({}, DType::i32); });
    if (initialized) {
      // (batch..., max_length, heads, head_dim)
      std::vector<std::int64_t> expected = cached_key.shape().dims();
      const std::size_t length_axis = expected.size() - 3;
      const std::int64_t max_length = expected[length_axis];
      expected[length_axis] = 1;
      if (query.shape() != Shape(expected))
        fail(detail::str("Autoregressive cache shape error, expected query shape ", Shape(expected),
                         " instead got ", query.shape(),
                         "; with decode, init with inputs of the full length (the cache's) and "
                         "then apply one position at a time"));
      std::vector<Array> indices(expected.size(), zeros({}, DType::i32));
      indices[length_axis] = cache_index;
      key = lax::dynamic_update_slice(cached_key, key, indices);
      value = lax::dynamic_update_slice(cached_value, value, indices);
      s.put_variable("cache", "cached_key", key);
      s.put_variable("cache", "cached_value", value);
      s.put_variable("cache", "cache_index", cache_index + 1.0);
      // The one query position attends to the positions cached so far, not the zeros after.
      std::vector<std::int64_t> mask_dims(expected.begin(), expected.begin() + length_axis);
      mask_dims.insert(mask_dims.end(), {1, 1, max_length});
      const Array cached = broadcast_to(
          greater_equal(cache_index, lax::iota(DType::i32, Shape{max_length})), Shape(mask_dims));
      const Array masks[] = {mask, cached};
      mask = combine_masks(masks);
    }
  }

  AttentionOptions options{.mask = mask,
                           .broadcast_dropout = broadcast_dropout,
                           .dropout_rng = args.dropout_rng,
                           .dropout_rate = dropout_rate,
                           .deterministic = true,
                           .dtype = dtype,
                           .force_fp32_for_softmax = force_fp32_for_softmax};
  if (dropout_rate > 0.0) {  // Flax's merge_param("deterministic", ...)
    if (deterministic.has_value() == args.deterministic.has_value())
      fail(deterministic ? "deterministic was given to the module and to the call; give it once"
                         : "dropout_rate > 0 needs deterministic, given to the module or the call");
    options.deterministic = deterministic.value_or(*args.deterministic);
    if (!options.deterministic && !options.dropout_rng) options.dropout_rng = s.make_rng("dropout");
  }
  const Array x = attention_fn ? attention_fn(query, key, value, options)
                               : dot_product_attention(query, key, value, options);
  return s.call("out",
                DenseGeneral{.features = {features},
                             .axis = {-2, -1},
                             .use_bias = use_bias,
                             .dtype = dtype,
                             .param_dtype = param_dtype,
                             .kernel_init = out_kernel_init.value_or(kernel_init),
                             .bias_init = out_bias_init.value_or(bias_init)},
                x);
}

}  // namespace flaxpp::nn
