// dot_product_attention and its backward primitive (flaxpp/ir/lax_attention.hpp): the shape
// rules, the VJP, the batching rules (vmap), what one equation costs (its products' FLOPs), and
// the devices' fused kernels.
#include "flaxpp/ir/lax_attention.hpp"

#include <array>

#include "rules.hpp"

namespace flaxpp::lax {
namespace {

// Strides over (B, N, T, S) of a rank-4 operand broadcastable to `full`: 0 along its axes of
// size 1, the row-major strides of its own shape along the others.
std::array<std::int64_t, 4> broadcast_strides(const std::string& prim, const char* what,
                                              const AVal& a,
                                              const std::array<std::int64_t, 4>& full) {
  if (a.shape.rank() != 4)
    rules::fail(prim,
                detail::str("the ", what, " must have rank 4, broadcastable to (B, N, T, S) = ",
                            rules::list_str({full.begin(), full.end()}), "; got ", a,
                            " (add leading axes of size 1)"));
  std::array<std::int64_t, 4> strides{};
  std::int64_t stride = 1;
  for (int i = 3; i >= 0; --i) {
    const std::int64_t d = a.shape[i];
    if (d != 1 && d != full[static_cast<std::size_t>(i)])
      rules::fail(prim, detail::str("the ", what, " ", a, " does not broadcast to (B, N, T, S) = ",
                                    rules::list_str({full.begin(), full.end()})));
    strides[static_cast<std::size_t>(i)] = d == 1 ? 0 : stride;
    stride *= d;
  }
  return strides;
}

// The forward's operands (the first dims.num_forward_operands() of `in`) checked.
AttentionDims check_forward(const std::string& prim, std::span<const AVal> in,
                            const ir::Params& params) {
  AttentionDims d;
  d.has_bias = params.get<bool>("bias");
  d.has_mask = params.get<bool>("mask");
  d.params = {params.get<double>("scale"), params.get<bool>("is_causal")};
  if (in.size() < d.num_forward_operands())
    rules::fail(prim, detail::str("takes query, key, value", d.has_bias ? ", bias" : "",
                                  d.has_mask ? ", mask" : "", "; got ", rules::avals_str(in)));
  const AVal &q = in[0], &k = in[1], &v = in[2];
  rules::expect_floating(prim, q);
  if (q.shape.rank() != 4 || k.shape.rank() != 4)
    rules::fail(prim, detail::str("query (B, T, N, H) and key (B, S, K, H) must have rank 4; got ",
                                  rules::avals_str(in.first(3))));
  if (k.dtype != q.dtype || v != k)
    rules::fail(prim, detail::str("key and value must be one aval of query's dtype; got ",
                                  rules::avals_str(in.first(3))));
  d.batch = q.shape[0];
  d.q_len = q.shape[1];
  d.heads = q.shape[2];
  d.head_dim = q.shape[3];
  d.kv_len = k.shape[1];
  d.kv_heads = k.shape[2];
  if (k.shape[0] != d.batch || k.shape[3] != d.head_dim)
    rules::fail(prim,
                detail::str("key must be (B, S, K, H) for query (B, T, N, H) = ", q, "; got ", k));
  if (d.kv_heads == 0 || d.heads % d.kv_heads != 0)
    rules::fail(prim, detail::str("the number of query heads must be a multiple of key/value "
                                  "heads, but got ",
                                  d.heads, " vs ", d.kv_heads));
  const std::array<std::int64_t, 4> full{d.batch, d.heads, d.q_len, d.kv_len};
  if (d.has_bias) {
    const AVal& bias = in[d.bias_index()];
    if (bias.dtype != q.dtype)
      rules::fail(prim, detail::str("the bias must have query's dtype ", dtype_name(q.dtype),
                                    "; got ", bias));
    d.bias_strides = broadcast_strides(prim, "bias", bias, full);
  }
  if (d.has_mask) {
    const AVal& mask = in[d.mask_index()];
    if (mask.dtype != DType::bool_)
      rules::fail(prim, detail::str("the mask must be bool (true: attend); got ", mask));
    d.mask_strides = broadcast_strides(prim, "mask", mask, full);
  }
  return d;
}

AVal lse_aval(const AttentionDims& d) {
  return {Shape{d.batch, d.heads, d.q_len}, DType::f32};
}

// The products of one forward pass: scores and weighted values, 2·B·N·T·S·H each.
std::int64_t forward_flops(const AttentionDims& d) {
  return 4 * d.batch * d.heads * d.q_len * d.kv_len * d.head_dim;
}

}  // namespace

AttentionDims attention_dims(std::span<const AVal> operands, const ir::Params& params) {
  return check_forward("dot_product_attention", operands, params);
}

AttentionDims attention_dims(std::span<const Array> operands, const ir::Params& params) {
  std::vector<AVal> avals;
  for (const Array& a : operands)
    avals.push_back(a.aval());
  return attention_dims(avals, params);
}

const ir::Primitive dot_product_attention_bwd_p(
    "dot_product_attention_bwd", [](std::span<const AVal> in, const ir::Params& params) {
      const char* const name = "dot_product_attention_bwd";
      const AttentionDims d = check_forward(name, in, params);
      const std::size_t n = d.num_forward_operands();
      rules::expect_arity(name, in, n + 3);
      if (in[n] != in[0] || in[n + 1] != lse_aval(d) || in[n + 2] != in[0])
        rules::fail(name, detail::str("out and dout must be query's aval and lse ", lse_aval(d),
                                      "; got ", rules::avals_str(in.subspan(n))));
      std::vector<AVal> out{in[0], in[1], in[2]};
      if (d.has_bias) out.push_back(in[d.bias_index()]);
      return out;
    });

const ir::Primitive dot_product_attention_p(
    "dot_product_attention",
    [](std::span<const AVal> in, const ir::Params& params) {
      const AttentionDims d = check_forward("dot_product_attention", in, params);
      rules::expect_arity("dot_product_attention", in, d.num_forward_operands());
      return std::vector<AVal>{in[0], lse_aval(d)};
    },
    [](const ir::VjpArgs& a) {
      // lse is a residual for the backward pass (JAX's stop_gradient(lse)): its cotangent is
      // ignored.
      std::vector<Array> cts(a.inputs.size());
      if (!a.cotangents[0].valid()) return cts;
      std::vector<Array> in(a.inputs.begin(), a.inputs.end());
      in.push_back(a.outputs[0]);
      in.push_back(a.outputs[1]);
      in.push_back(a.cotangents[0]);
      const std::vector<Array> grads = ir::bind(dot_product_attention_bwd_p, in, a.params);
      for (std::size_t i = 0; i < grads.size(); ++i)
        cts[i] = grads[i];  // query, key, value, bias: the operands' first positions
      return cts;
    });

std::vector<Array> fused_attention(const Array& query, const Array& key, const Array& value,
                                   const Array& bias, const Array& mask,
                                   const AttentionParams& params) {
  std::vector<Array> in{query, key, value};
  if (bias.valid()) in.push_back(bias);
  if (mask.valid()) in.push_back(mask);
  return ir::bind(dot_product_attention_p, in,
                  {{"scale", params.scale},
                   {"is_causal", params.is_causal},
                   {"bias", bias.valid()},
                   {"mask", mask.valid()}});
}

namespace {

// Batching: the examples of the batch become more of the equation's own batch axis B (V
// examples of B each: V·B), and the results split it again.

// A query, key, value, out, lse or dout operand with the batch axis, its first two axes merged.
Array merged(const Array& x, bool batched, std::int64_t size) {
  const Array b = ir::with_batch_axis(x, batched, size);
  std::vector<std::int64_t> dims = b.shape().dims();
  dims[1] *= dims[0];
  dims.erase(dims.begin());
  return reshape(b, Shape(std::move(dims)));
}

// A bias or mask, broadcastable to (B, N, T, S), made broadcastable to (V·B, N, T, S): one of
// B = 1 the same for every example stays as it is unless `per_example`; otherwise its B axis is
// made whole and merged.
Array merged_broadcast(const Array& x, bool batched, std::int64_t size, std::int64_t batch,
                       bool per_example) {
  if (!batched && !per_example && x.shape()[0] == 1) return x;
  Array b = ir::with_batch_axis(x, batched, size);
  if (b.shape()[1] != batch) {
    std::vector<std::int64_t> dims = b.shape().dims();
    dims[1] = batch;
    b = broadcast_in_dim(b, Shape(std::move(dims)), {0, 1, 2, 3, 4});
  }
  return merged(b, true, size);
}

// A result (V·B, ...) as (V, B, ...).
Array split(const Array& x, std::int64_t size) {
  std::vector<std::int64_t> dims = x.shape().dims();
  dims[0] /= size;
  dims.insert(dims.begin(), size);
  return reshape(x, Shape(std::move(dims)));
}

// The operands of either primitive merged. The backward pass takes the bias per example, so
// that its cotangent comes out per example.
std::vector<Array> merged_operands(const ir::BatchArgs& a, const AttentionDims& d,
                                   bool bias_per_example) {
  std::vector<Array> in;
  for (std::size_t i = 0; i < a.inputs.size(); ++i) {
    const bool broadcastable =
        (d.has_bias && i == d.bias_index()) || (d.has_mask && i == d.mask_index());
    const bool per_example = bias_per_example && d.has_bias && i == d.bias_index();
    in.push_back(broadcastable
                     ? merged_broadcast(a.inputs[i], a.batched[i], a.size, d.batch, per_example)
                     : merged(a.inputs[i], a.batched[i], a.size));
  }
  return in;
}

AttentionDims unbatched_dims(const ir::BatchArgs& a) {
  std::vector<AVal> avals;
  for (std::size_t i = 0; i < a.inputs.size(); ++i) {
    AVal v = a.inputs[i].aval();
    if (a.batched[i]) {
      std::vector<std::int64_t> dims = v.shape.dims();
      dims.erase(dims.begin());
      v.shape = Shape(std::move(dims));
    }
    avals.push_back(v);
  }
  return attention_dims(avals, a.params);
}

ir::BatchedResults attention_batched(const ir::BatchArgs& a) {
  const AttentionDims d = unbatched_dims(a);
  const std::vector<Array> r =
      ir::bind(dot_product_attention_p, merged_operands(a, d, false), a.params);
  return {{split(r[0], a.size), split(r[1], a.size)}, {true, true}};
}

ir::BatchedResults attention_bwd_batched(const ir::BatchArgs& a) {
  const AttentionDims d = unbatched_dims(a);
  const std::vector<Array> in = merged_operands(a, d, true);
  const std::vector<Array> r = ir::bind(dot_product_attention_bwd_p, in, a.params);
  ir::BatchedResults out{{split(r[0], a.size), split(r[1], a.size), split(r[2], a.size)},
                         {true, true, true}};
  if (!d.has_bias) return out;
  // dbias (V, B, N', T', S') per example, summed back to the given bias's B of 1 where that
  // axis was made whole.
  Array dbias = split(r[3], a.size);
  const Array& given = a.inputs[d.bias_index()];
  if (given.shape()[a.batched[d.bias_index()] ? 1 : 0] != dbias.shape()[1]) {
    std::vector<std::int64_t> dims = dbias.shape().dims();
    dims[1] = 1;
    dbias = reshape(reduce_sum(dbias, {1}), Shape(std::move(dims)));
  }
  out.outputs.push_back(dbias);
  out.batched.push_back(true);
  return out;
}

const bool attention_rules_registered = [] {
  ir::register_batching(dot_product_attention_p, attention_batched);
  ir::register_batching(dot_product_attention_bwd_p, attention_bwd_batched);
  ir::register_flops(dot_product_attention_p,
                     [](std::span<const AVal> in, std::span<const AVal>, const ir::Params& p) {
                       return forward_flops(attention_dims(in, p));
                     });
  // Recomputing the scores and weights, then dvalue, dweights, dquery and dkey: 2.5 forwards.
  ir::register_flops(dot_product_attention_bwd_p,
                     [](std::span<const AVal> in, std::span<const AVal>, const ir::Params& p) {
                       return forward_flops(attention_dims(in, p)) * 5 / 2;
                     });
  return true;
}();

}  // namespace

namespace {
// Registered as the program starts, before any evaluation (as ir's evaluators are).
std::array<AttentionKernel, kNumDeviceKinds>& attention_kernels() {
  static std::array<AttentionKernel, kNumDeviceKinds> kernels{};
  return kernels;
}
}  // namespace

void register_attention_kernel(DeviceKind kind, AttentionKernel kernel) {
  attention_kernels()[static_cast<std::size_t>(kind)] = kernel;
}

AttentionKernel attention_kernel(DeviceKind kind) {
  return attention_kernels()[static_cast<std::size_t>(kind)];
}

}  // namespace flaxpp::lax
