// CPU evaluation of dot_product_attention and its backward primitive
// (flaxpp/ir/lax_attention.hpp), one query row at a time: the forward pass reads the keys in
// tiles of kTile scores with an online softmax (a running maximum and sum, FlashAttention's),
// the backward pass recomputes each score from the row's logsumexp. No more than a tile of
// scores per head exists at once. Logits are formed in the operands' dtype, the softmax runs
// in float32, as XLA's arithmetic does.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_eval.hpp"
#include "backend/cpu/cpu_eval_impl.hpp"
#include "backend/cpu/cpu_parallel.hpp"
#include "flaxpp/ir/lax_attention.hpp"

namespace flaxpp::cpu {
namespace {

constexpr std::int64_t kTile = 64;

// a . b over n elements in kLanes running sums, added pairwise at the end: a fixed order of
// its own, which the compiler turns into vector instructions (one running sum would pin it to
// one element at a time).
template <class T>
T dot(const T* a, const T* b, std::int64_t n) {
  constexpr std::int64_t kLanes = 8;
  T lanes[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l)
      lanes[l] += a[i + l] * b[i + l];
  for (; i < n; ++i)
    lanes[i % kLanes] += a[i] * b[i];
  for (std::int64_t width = kLanes / 2; width > 0; width /= 2)
    for (std::int64_t l = 0; l < width; ++l)
      lanes[l] += lanes[l + width];
  return lanes[0];
}

// y += alpha * x over n elements.
template <class T>
void axpy(T alpha, const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    y[i] += alpha * x[i];
}

// One equation's operands, and the score of a query row against one key.
template <class T>
class Scores {
 public:
  Scores(const lax::AttentionDims& d, std::span<const Array> in)
      : d_(d),
        q_(in_data<T>(in[0])),
        k_(in_data<T>(in[1])),
        v_(in_data<T>(in[2])),
        bias_(d.has_bias ? in_data<T>(in[d.bias_index()]) : nullptr),
        mask_(d.has_mask ? in_data<std::uint8_t>(in[d.mask_index()]) : nullptr),
        scale_(static_cast<T>(d.params.scale)),
        group_(d.heads / d.kv_heads) {}

  // Row t of head n of example b: its query (H values), and its place in (B, T, N, H).
  std::int64_t q_offset(std::int64_t b, std::int64_t n, std::int64_t t) const {
    return ((b * d_.q_len + t) * d_.heads + n) * d_.head_dim;
  }
  // Key/value row j read by query head n of example b.
  std::int64_t kv_offset(std::int64_t b, std::int64_t n, std::int64_t j) const {
    return ((b * d_.kv_len + j) * d_.kv_heads + n / group_) * d_.head_dim;
  }
  const T* query(std::int64_t offset) const { return q_ + offset; }
  const T* value(std::int64_t offset) const { return v_ + offset; }
  const T* key(std::int64_t offset) const { return k_ + offset; }

  // Whether the mask and causality let query t of (b, n) see key j.
  bool allowed(std::int64_t b, std::int64_t n, std::int64_t t, std::int64_t j) const {
    if (d_.params.is_causal && j > t) return false;
    return mask_ == nullptr || mask_[at(d_.mask_strides, b, n, t, j)] != 0;
  }
  std::int64_t bias_at(std::int64_t b, std::int64_t n, std::int64_t t, std::int64_t j) const {
    return at(d_.bias_strides, b, n, t, j);
  }
  // Row t of head n of example b in the (B, N, T) logsumexp.
  std::int64_t lse_offset(std::int64_t b, std::int64_t n, std::int64_t t) const {
    return (b * d_.heads + n) * d_.q_len + t;
  }

  // The padded float32 logit of query row `q` (of (b, n, t)) against key j.
  float logit(const T* q, std::int64_t b, std::int64_t n, std::int64_t t, std::int64_t j) const {
    if (!allowed(b, n, t, j)) return lax::kAttentionMaskValue;
    T s = dot(q, key(kv_offset(b, n, j)), d_.head_dim) * scale_;
    if (bias_ != nullptr) s += bias_[bias_at(b, n, t, j)];
    return static_cast<float>(s);
  }

  // exp(logit - m) for a row whose maximum (or logsumexp) is m. Once m is above half the mask
  // value, a masked logit's weight exp(mask - m) is exactly 0 in float32: it is not computed
  // (exp's underflow is its slow path).
  static float weight(float logit, float m) {
    return logit == lax::kAttentionMaskValue && masked_vanish(m) ? 0.0f : std::exp(logit - m);
  }
  // After the causal diagonal every key is masked: once masked weights vanish, the rest of the
  // row is skipped. A row masked everywhere so far (m the mask value) reads them all, as XLA
  // does.
  bool rest_is_zero(std::int64_t t, std::int64_t j, float m) const {
    return d_.params.is_causal && j > t && masked_vanish(m);
  }

 private:
  static bool masked_vanish(float m) { return m > lax::kAttentionMaskValue / 2; }
  static std::int64_t at(const std::array<std::int64_t, 4>& strides, std::int64_t b, std::int64_t n,
                         std::int64_t t, std::int64_t j) {
    return b * strides[0] + n * strides[1] + t * strides[2] + j * strides[3];
  }

  const lax::AttentionDims& d_;
  const T *q_, *k_, *v_, *bias_;
  const std::uint8_t* mask_;
  T scale_;
  std::int64_t group_;
};

// Every (b, n, t) row of the equation, shared among the CPU's threads by example and head —
// by key/value head with `by_kv_head`, so that one thread writes each head's dkey and dvalue —
// or all on the calling thread with `serial`. Each share keeps the rows' order, so that no sum
// depends on the thread count.
template <class F>
void for_each_row(const lax::AttentionDims& d, bool by_kv_head, bool serial, F&& f) {
  const std::int64_t heads_per_unit = by_kv_head ? d.heads / d.kv_heads : 1;
  const std::int64_t units_per_example = d.heads / heads_per_unit;
  const auto rows = [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t u = begin; u < end; ++u) {
      const std::int64_t b = u / units_per_example;
      const std::int64_t first = u % units_per_example * heads_per_unit;
      for (std::int64_t n = first; n < first + heads_per_unit; ++n)
        for (std::int64_t t = 0; t < d.q_len; ++t)
          f(b, n, t);
    }
  };
  const std::int64_t units = d.batch * units_per_example;
  if (serial)
    rows(0, units);
  else
    parallel_for(units, 1, rows);
}

template <class T>
std::vector<Array> forward(const lax::AttentionDims& d, std::span<const Array> in,
                           std::span<const AVal> out_avals) {
  const Scores<T> s(d, in);
  const Output out(out_avals[0]), lse(out_avals[1]);
  T* o = out.data<T>();
  float* lse_data = lse.data<float>();
  const std::int64_t H = d.head_dim;
  for_each_row(d, false, false, [&](std::int64_t b, std::int64_t n, std::int64_t t) {
    thread_local std::vector<T> acc;  // the row's weighted values, not yet divided by l
    float scores[kTile];
    const std::int64_t qo = s.q_offset(b, n, t);
    const T* q = s.query(qo);
    float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
    acc.assign(static_cast<std::size_t>(H), T(0));
    for (std::int64_t j0 = 0; j0 < d.kv_len; j0 += kTile) {
      if (s.rest_is_zero(t, j0, m)) break;
      const std::int64_t tile = std::min(kTile, d.kv_len - j0);
      float tile_max = -std::numeric_limits<float>::infinity();
      for (std::int64_t jj = 0; jj < tile; ++jj) {
        scores[jj] = s.logit(q, b, n, t, j0 + jj);
        tile_max = std::max(tile_max, scores[jj]);
      }
      const float m_new = std::max(m, tile_max);
      const float alpha = std::exp(m - m_new);
      l *= alpha;
      for (T& a : acc)
        a *= static_cast<T>(alpha);
      for (std::int64_t jj = 0; jj < tile; ++jj) {
        const float p = Scores<T>::weight(scores[jj], m_new);
        l += p;
        axpy(static_cast<T>(p), s.value(s.kv_offset(b, n, j0 + jj)), acc.data(), H);
      }
      m = m_new;
    }
    const T inv = static_cast<T>(1.0f / l);
    for (std::int64_t h = 0; h < H; ++h)
      o[qo + h] = acc[static_cast<std::size_t>(h)] * inv;
    lse_data[s.lse_offset(b, n, t)] = m + std::log(l);
  });
  return {out.array(), lse.array()};
}

// A zero-filled result.
template <class T>
Output zeroed(const AVal& aval) {
  const Output o(aval);
  std::memset(o.data<T>(), 0, static_cast<std::size_t>(aval.shape.size()) * sizeof(T));
  return o;
}

template <class T>
std::vector<Array> backward(const lax::AttentionDims& d, std::span<const Array> in,
                            std::span<const AVal> out_avals) {
  const Scores<T> s(d, in);
  const std::size_t n_in = d.num_forward_operands();
  const T* out = in_data<T>(in[n_in]);
  const float* lse = in_data<float>(in[n_in + 1]);
  const T* dout = in_data<T>(in[n_in + 2]);
  const Output dq_out = zeroed<T>(out_avals[0]), dk_out = zeroed<T>(out_avals[1]),
               dv_out = zeroed<T>(out_avals[2]);
  std::optional<Output> dbias_out;
  if (d.has_bias) dbias_out.emplace(zeroed<T>(out_avals[3]));
  T *dq = dq_out.data<T>(), *dk = dk_out.data<T>(), *dv = dv_out.data<T>();
  T* dbias = d.has_bias ? dbias_out->data<T>() : nullptr;
  const T scale = static_cast<T>(d.params.scale);
  const std::int64_t H = d.head_dim;
  // A bias shared by examples or heads gets every row's dbias: one thread adds them.
  const bool shared_bias = d.has_bias && ((d.bias_strides[0] == 0 && d.batch > 1) ||
                                          (d.bias_strides[1] == 0 && d.heads > 1));
  for_each_row(d, true, shared_bias, [&](std::int64_t b, std::int64_t n, std::int64_t t) {
    const std::int64_t qo = s.q_offset(b, n, t);
    const T* q = s.query(qo);
    const T* go = dout + qo;
    const float row_lse = lse[s.lse_offset(b, n, t)];
    // The softmax's VJP: dlogit_j = p_j (dp_j - sum_i p_i dp_i), and sum_i p_i dp_i = dout . out.
    const float delta = static_cast<float>(dot(go, out + qo, H));
    for (std::int64_t j = 0; j < d.kv_len; ++j) {
      if (s.rest_is_zero(t, j, row_lse)) break;
      const float p = Scores<T>::weight(s.logit(q, b, n, t, j), row_lse);
      const std::int64_t kvo = s.kv_offset(b, n, j);
      const T dp = dot(go, s.value(kvo), H);
      axpy(static_cast<T>(p), go, dv + kvo, H);
      // A masked logit was replaced by a constant: no gradient flows to the product or bias.
      if (!s.allowed(b, n, t, j)) continue;
      const T dlogit = static_cast<T>(p * (static_cast<float>(dp) - delta));
      if (dbias != nullptr) dbias[s.bias_at(b, n, t, j)] += dlogit;
      const T dqk = dlogit * scale;
      axpy(dqk, s.key(kvo), dq + qo, H);
      axpy(dqk, q, dk + kvo, H);
    }
  });
  std::vector<Array> results{dq_out.array(), dk_out.array(), dv_out.array()};
  if (dbias_out) results.push_back(dbias_out->array());
  return results;
}

template <bool kBackward>
std::vector<Array> evaluate(const ir::Primitive& prim, std::span<const Array> in,
                            const ir::Params& params, std::span<const AVal> out_avals) {
  const lax::AttentionDims d = lax::attention_dims(in, params);
  return visit_dtype<kFloat, std::vector<Array>>(prim, in[0].dtype(), [&]<class T>(TypeTag<T>) {
    return kBackward ? backward<T>(d, in, out_avals) : forward<T>(d, in, out_avals);
  });
}

}  // namespace

void register_attention() {
  ir::register_impl(lax::dot_product_attention_p, DeviceKind::cpu, evaluate<false>);
  ir::register_impl(lax::dot_product_attention_bwd_p, DeviceKind::cpu, evaluate<true>);
}

}  // namespace flaxpp::cpu
