// jax.nn.dot_product_attention (flaxpp/ops/dot_product_attention.hpp): JAX's argument checks,
// the fused primitive or XLA's composed arithmetic, and that arithmetic as the fused
// primitives' evaluation on CUDA where cuDNN's fused kernel does not take the operands.
#include "flaxpp/ops/dot_product_attention.hpp"

#include <atomic>
#include <cmath>
#include <cstdio>

#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "ops/unfused_attention.hpp"

namespace flaxpp {
namespace attention_detail {
namespace {

using ir::DotDimensionNumbers;

// Whether query t may see key j (B?, N?, T, S) as bool: the mask and, with is_causal, j <= t;
// an invalid Array where neither restricts.
Array allowed(const Array& mask, bool is_causal, std::int64_t q_len, std::int64_t kv_len) {
  if (!is_causal) return mask;
  const Shape ts{1, 1, q_len, kv_len};
  const Array causal = lax::ge(lax::iota(DType::i32, ts, 2), lax::iota(DType::i32, ts, 3));
  // mask and causal: where the mask holds, causal, else the mask's false.
  return mask.valid() ? where(mask, causal, mask) : causal;
}

// (B, N, T, S) x (B, T, N, H) -> (B, S, N, H): einsum('BNTS,BTNH->BSNH').
Array apply_weights_transposed(const Array& weights, const Array& x) {
  const Array r = lax::dot_general(weights, x, DotDimensionNumbers{{2}, {1}, {0, 1}, {0, 2}});
  return lax::transpose(r, {0, 2, 1, 3});
}

// (B, S, N, H) summed over each group of N / K heads: (B, S, K, H), repeat_heads's transpose.
Array sum_groups(const Array& x, std::int64_t kv_heads) {
  const auto& s = x.shape();
  if (s[2] == kv_heads) return x;
  return sum(reshape(x, {s[0], s[1], kv_heads, s[2] / kv_heads, s[3]}), Axes{3});
}

// The cotangent of a bias broadcast to (B, N, T, S): summed along its axes of size 1.
Array unbroadcast_bias(const Array& dlogits, const Shape& bias_shape) {
  Axes axes;
  for (std::int64_t i = 0; i < 4; ++i)
    if (bias_shape[i] == 1 && dlogits.shape()[i] != 1) axes.push_back(i);
  return axes.empty() ? dlogits : sum(dlogits, axes, true);
}

}  // namespace

Array repeat_heads(const Array& kv, std::int64_t heads) {
  const auto& s = kv.shape();
  if (s[2] == heads) return kv;
  const std::int64_t group = heads / s[2];
  const Array grouped =
      lax::broadcast_in_dim(kv, Shape{s[0], s[1], s[2], group, s[3]}, {0, 1, 2, 4});
  return reshape(grouped, {s[0], s[1], heads, s[3]});
}

Array padded_logits(const Array& query, const Array& key_heads, const Array& bias,
                    const Array& mask, const lax::AttentionParams& params) {
  // XLA's: the product in float32 at least, scaled, biased, masked, then float32.
  const std::optional<DType> wide =
      is_half(query.dtype()) ? std::optional<DType>(DType::f32) : std::nullopt;
  Array logits =
      lax::dot_general(query, key_heads, DotDimensionNumbers{{3}, {3}, {0, 2}, {0, 2}}, wide);
  logits = logits * params.scale;
  if (bias.valid()) logits = logits + astype(bias, logits.dtype());
  const Array ok = allowed(mask, params.is_causal, query.shape()[1], key_heads.shape()[1]);
  if (ok.valid()) logits = where(ok, logits, lax::scalar(lax::kAttentionMaskValue, logits.dtype()));
  return astype(logits, DType::f32);
}

Array apply_weights(const Array& weights, const Array& value_heads) {
  const Array r =
      lax::dot_general(weights, value_heads, DotDimensionNumbers{{3}, {1}, {0, 1}, {0, 2}});
  return lax::transpose(r, {0, 2, 1, 3});
}

namespace {

struct Operands {
  lax::AttentionDims dims;
  Array query, key_heads, value_heads, bias, mask;
};

Operands operands(std::span<const Array> in, const ir::Params& params) {
  Operands o{lax::attention_dims(in, params), in[0], {}, {}, {}, {}};
  o.key_heads = repeat_heads(in[1], o.dims.heads);
  o.value_heads = repeat_heads(in[2], o.dims.heads);
  if (o.dims.has_bias) o.bias = in[o.dims.bias_index()];
  if (o.dims.has_mask) o.mask = in[o.dims.mask_index()];
  return o;
}

Array logits_of(const Operands& o) {
  return padded_logits(o.query, o.key_heads, o.bias, o.mask, o.dims.params);
}

}  // namespace

std::vector<Array> unfused_forward(std::span<const Array> in, const ir::Params& params) {
  const Operands o = operands(in, params);
  const Array logits = logits_of(o);
  const Array lse = logsumexp(logits, Axes{3}, true);
  const Array weights = astype(exp(logits - lse), o.value_heads.dtype());
  const auto& d = o.dims;
  return {apply_weights(weights, o.value_heads), reshape(lse, {d.batch, d.heads, d.q_len})};
}

std::vector<Array> unfused_backward(std::span<const Array> in, const ir::Params& params) {
  const Operands o = operands(in, params);
  const auto& d = o.dims;
  const std::size_t n = d.num_forward_operands();
  const Array &out = in[n], &lse = in[n + 1], &dout = in[n + 2];
  const DType dtype = o.query.dtype();
  const Array p = exp(logits_of(o) - reshape(lse, {d.batch, d.heads, d.q_len, 1}));
  const Array dvalue = apply_weights_transposed(astype(p, dtype), dout);
  // The softmax's VJP: p (dp - sum_j p_j dp_j), the sum being dout . out.
  const Array dp =
      astype(lax::dot_general(dout, o.value_heads, DotDimensionNumbers{{3}, {3}, {0, 2}, {0, 2}}),
             DType::f32);
  const Array delta =
      reshape(transpose(astype(sum(dout * out, Axes{3}), DType::f32), Axes{0, 2, 1}),
              {d.batch, d.heads, d.q_len, 1});
  Array dlogits = astype(p * (dp - delta), dtype);
  const Array ok = allowed(o.mask, d.params.is_causal, d.q_len, d.kv_len);
  if (ok.valid()) dlogits = where(ok, dlogits, lax::zeros_like(dlogits));
  const Array dqk = dlogits * d.params.scale;
  std::vector<Array> grads{apply_weights(dqk, o.key_heads),
                           sum_groups(apply_weights_transposed(dqk, o.query), d.kv_heads),
                           sum_groups(dvalue, d.kv_heads)};
  if (d.has_bias) grads.push_back(unbroadcast_bias(dlogits, o.bias.shape()));
  return grads;
}

}  // namespace attention_detail

namespace {

// CUDA: the device's fused kernel (cuDNN's flash attention, for float16 and bfloat16 operands
// without a bias or mask) where it takes the operands, else the unfused arithmetic, said once.
void say_unfused_once() {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  std::fprintf(stderr,
               "flaxpp: dot_product_attention on CUDA runs the unfused arithmetic (the (B, N, T, "
               "S) logits materialised) where cuDNN's fused attention does not take the operands "
               "(it takes float16 and bfloat16 without a bias or mask, in builds with cuDNN's "
               "frontend)\n");
}

std::vector<Array> cuda_evaluate(const ir::Primitive& prim, std::span<const Array> in,
                                 const ir::Params& params, std::span<const AVal> out) {
  if (const lax::AttentionKernel kernel = lax::attention_kernel(DeviceKind::cuda)) {
    std::vector<Array> fused = kernel(prim, in, params, out);
    if (!fused.empty()) return fused;
  }
  say_unfused_once();
  return &prim == &lax::dot_product_attention_p ? attention_detail::unfused_forward(in, params)
                                                : attention_detail::unfused_backward(in, params);
}

const bool cuda_attention_registered = [] {
  ir::register_impl(lax::dot_product_attention_p, DeviceKind::cuda, cuda_evaluate);
  ir::register_impl(lax::dot_product_attention_bwd_p, DeviceKind::cuda, cuda_evaluate);
  return true;
}();

[[noreturn]] void fail(const std::string& message) {
  throw ValueError("dot_product_attention: " + message);
}

// jax.nn's _ensure_4d: leading axes of size 1 up to rank 4.
Array ensure_4d(const Array& x) {
  if (!x.valid() || x.rank() >= 4) return x;
  std::vector<std::int64_t> dims(static_cast<std::size_t>(4 - x.rank()), 1);
  for (const std::int64_t d : x.shape().dims())
    dims.push_back(d);
  return reshape(x, dims);
}

// jax.nn's _check_shape_and_dtype: rank, dtype (where given) and the sizes other than -1.
void check_shape_and_dtype(const Array& x, const std::vector<std::int64_t>& shape,
                           std::optional<DType> dtype, const char* name) {
  if (!x.valid()) return;
  if (x.rank() != static_cast<std::int64_t>(shape.size()))
    fail(detail::str(name, " ndim should be ", shape.size(), ", but got ", x.rank()));
  if (dtype && x.dtype() != *dtype)
    fail(detail::str(name, " dtype should be ", dtype_name(*dtype), ", but got ",
                     dtype_name(x.dtype())));
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != -1 && x.shape()[static_cast<std::int64_t>(i)] != shape[i])
      fail(detail::str(name, " shape should be ", Shape(shape), ": but got ", x.shape()));
}

// implementation "cudnn": what flaxpp's use of cuDNN's fused attention takes. A configuration
// cuDNN itself rejects (a head size it has no kernel for, say) is reported once on stderr and
// runs the unfused arithmetic.
void check_cudnn_takes(const Array& q, const Array& bias, const Array& mask) {
  const char* const instead = "; use implementation none (flaxpp's fused attention) or \"xla\"";
  if (lax::attention_kernel(DeviceKind::cuda) == nullptr)
    fail(
        detail::str("implementation \"cudnn\" needs a build of flaxpp with CUDA, cuDNN and "
                    "cuDNN's frontend, and this one has none",
                    instead));
  if (!is_half(q.dtype()))
    fail(detail::str("implementation \"cudnn\" takes float16 or bfloat16 operands, but got ",
                     dtype_name(q.dtype()), instead));
  if (bias.valid() || mask.valid())
    fail(
        detail::str("implementation \"cudnn\" takes no bias or mask in flaxpp yet (is_causal it "
                    "takes)",
                    instead));
  if (!q.is_traced() && q.device().kind != DeviceKind::cuda)
    fail(detail::str("implementation \"cudnn\" runs on a GPU, but query is on ", q.device(),
                     "; move the operands there with to()", instead));
}

}  // namespace

Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const DotProductAttentionOptions& options) {
  const Array q = ensure_4d(query), k = ensure_4d(key), v = ensure_4d(value);
  Array bias = ensure_4d(options.bias);
  const Array mask = ensure_4d(options.mask);
  if (k.rank() != 4) fail(detail::str("key ndim should be 4, but got ", k.rank()));
  const std::int64_t B = k.shape()[0], S = k.shape()[1], K = k.shape()[2], H = k.shape()[3];
  check_shape_and_dtype(v, {B, S, K, H}, k.dtype(), "value");
  check_shape_and_dtype(q, {B, -1, -1, H}, k.dtype(), "query");
  check_shape_and_dtype(mask, {-1, -1, -1, -1}, DType::bool_, "mask");
  check_shape_and_dtype(bias, {-1, -1, -1, -1}, std::nullopt, "bias");
  if (q.shape()[2] % K != 0)
    fail(detail::str("The number of query heads must be a multiple of key/value heads, but got ",
                     q.shape()[2], " vs ", K));
  if (bias.valid()) bias = astype(bias, q.dtype());
  const lax::AttentionParams params{options.scale.value_or(1.0 / std::sqrt(static_cast<double>(H))),
                                    options.is_causal};

  Array out;
  if (!options.implementation) {
    out = lax::fused_attention(q, k, v, bias, mask, params)[0];
  } else if (*options.implementation == "xla") {
    const std::int64_t heads = q.shape()[2];
    const Array logits = attention_detail::padded_logits(
        q, attention_detail::repeat_heads(k, heads), bias, mask, params);
    out = attention_detail::apply_weights(astype(softmax(logits, -1), v.dtype()),
                                          attention_detail::repeat_heads(v, heads));
  } else if (*options.implementation == "cudnn") {
    check_cudnn_takes(q, bias, mask);
    out = lax::fused_attention(q, k, v, bias, mask, params)[0];
  } else {
    fail(detail::str("Unsupported implementation option: ", *options.implementation,
                     " (expected none, \"xla\" or \"cudnn\")"));
  }
  return reshape(out, query.shape().dims());
}

}  // namespace flaxpp
