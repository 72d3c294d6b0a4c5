// cuDNN's fused attention through its frontend (cudnn_attention.hpp says what it takes). Tensors
// keep flaxpp's layout: query, key, value and the output are (B, T, N, H) in memory, which cuDNN
// reads as (B, N, T, H) dims with strides; the logsumexp is (B, N, T) float32. The frontend's
// graphs are kept per configuration in a cudnn::PlanCache, which also remembers a configuration
// cuDNN rejects (said once on stderr) so that it goes straight to the unfused arithmetic.
#include "backend/cuda/cudnn_attention.hpp"

#ifdef FLAXPP_WITH_CUDNN_FRONTEND
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#include <cudnn_frontend.h>

#include <memory>
#include <span>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_eval.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "backend/cuda/cudnn_graph.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/lax_attention.hpp"
#endif

namespace flaxpp::cuda {

#ifndef FLAXPP_WITH_CUDNN_FRONTEND

void register_cudnn_attention() {}
std::int64_t cudnn_attention_executions() {
  return 0;
}

#else

namespace {

namespace fe = cudnn_frontend;
using Tensor = std::shared_ptr<fe::graph::Tensor_attributes>;

// Unique ids of the tensors in a variant pack.
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// (device, forward, dtype, B, T, S, N, K, H, is_causal, scale): a graph's configuration.
using Key = std::tuple<int, bool, DType, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                       std::int64_t, std::int64_t, bool, double>;

struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  std::int64_t workspace = 0;
};

using State = cudnn::PlanCache<Key, Built>;

State& state() {
  static auto* const s = new State();
  return *s;
}

void check(fe::error_t status, const char* what) {
  if (status.is_bad()) throw cudnn::Rejected(detail::str(what, ": ", status.get_message()));
}

// The forward graph (output and logsumexp) or the backward one (dq, dk, dv) of `key`.
Built build(cudnnHandle_t handle, const Key& key) {
  const auto& [device, forward, dtype, B, T, S, N, K, H, is_causal, scale] = key;
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(dtype == DType::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // A (B, len, heads, H) array in memory as cuDNN's (B, heads, len, H).
  const auto dims = [&](std::int64_t len, std::int64_t heads) {
    return std::vector<std::int64_t>{B, heads, len, H};
  };
  const auto strides = [&](std::int64_t len, std::int64_t heads) {
    return std::vector<std::int64_t>{len * heads * H, H, heads * H, 1};
  };
  const auto input = [&](Uid uid, const char* name, std::int64_t len, std::int64_t heads) {
    return graph->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim(dims(len, heads))
                             .set_stride(strides(len, heads)));
  };
  const auto output = [&](const Tensor& t, Uid uid, std::int64_t len, std::int64_t heads) {
    t->set_output(true).set_uid(uid).set_dim(dims(len, heads)).set_stride(strides(len, heads));
  };
  const std::vector<std::int64_t> stats_dims{B, N, T, 1}, stats_strides{N * T, T, 1, 1};
  const Tensor q = input(kQ, "Q", T, N), k = input(kK, "K", S, K), v = input(kV, "V", S, K);
  if (forward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("flaxpp_attention")
                       .set_generate_stats(true)
                       .set_attn_scale(static_cast<float>(scale))
                       .set_causal_mask(is_causal);
    const auto [o, stats] = graph->sdpa(q, k, v, options);
    output(o, kO, T, N);
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stats_dims)
        .set_stride(stats_strides);
  } else {
    const Tensor o = input(kO, "O", T, N), dout = input(kDO, "dO", T, N);
    const Tensor stats = graph->tensor(fe::graph::Tensor_attributes()
                                           .set_name("Stats")
                                           .set_uid(kStats)
                                           .set_data_type(fe::DataType_t::FLOAT)
                                           .set_dim(stats_dims)
                                           .set_stride(stats_strides));
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("flaxpp_attention_backward")
                       .set_attn_scale(static_cast<float>(scale))
                       .set_causal_mask(is_causal);
    const auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, dout, stats, options);
    output(dq, kDQ, T, N);
    output(dk, kDK, S, K);
    output(dv, kDV, S, K);
  }
  check(graph->build(handle, {fe::HeurMode_t::A}), "building the graph");
  Built built{graph, 0};
  check(graph->get_workspace_size(built.workspace), "sizing its workspace");
  return built;
}

// lax::AttentionKernel: either primitive through cuDNN, or none for the unfused arithmetic.
std::vector<Array> attention(const ir::Primitive& prim, std::span<const Array> in,
                             const ir::Params& params, std::span<const AVal> out) {
  const bool forward = &prim == &lax::dot_product_attention_p;
  const lax::AttentionDims d = lax::attention_dims(in, params);
  const DType dtype = in[0].dtype();
  if (!cudnn_allowed() || d.has_bias || d.has_mask || !is_half(dtype)) return {};
  const Device device = in[0].device();
  CudaBackend& gpu = backend_of(in[0]);
  const Key key{device.index,  forward, dtype,      d.batch,    d.q_len,
                d.kv_len,      d.heads, d.kv_heads, d.head_dim, d.params.is_causal,
                d.params.scale};
  State& s = state();
  std::vector<Array> results;
  const bool ran = s.run(
      gpu, key,
      [&](cudnnHandle_t handle) {
        Built* built = s.find(gpu, key);
        if (built == nullptr) built = &s.keep(gpu, key, build(handle, key));
        std::vector<Output> outputs;
        for (const AVal& aval : out)
          outputs.emplace_back(aval, device);
        std::unordered_map<std::int64_t, void*> pack{
            {kQ, in[0].buffer().data()}, {kK, in[1].buffer().data()}, {kV, in[2].buffer().data()}};
        if (forward) {
          pack[kO] = outputs[0].data<void>();
          pack[kStats] = outputs[1].data<void>();
        } else {  // operands (q, k, v, out, lse, dout)
          pack[kO] = in[3].buffer().data();
          pack[kStats] = in[4].buffer().data();
          pack[kDO] = in[5].buffer().data();
          pack[kDQ] = outputs[0].data<void>();
          pack[kDK] = outputs[1].data<void>();
          pack[kDV] = outputs[2].data<void>();
        }
        std::shared_ptr<Buffer> workspace;
        if (built->workspace > 0) workspace = gpu.allocate(built->workspace);
        check(built->graph->execute(handle, pack, workspace ? workspace->data() : nullptr),
              "running it");
        for (const Output& o : outputs)
          results.push_back(o.array());
        return true;
      },
      [&] {
        return detail::str("attention ", forward ? "forward" : "backward", " (", dtype_name(dtype),
                           ", B ", d.batch, ", T ", d.q_len, ", S ", d.kv_len, ", N ", d.heads,
                           ", K ", d.kv_heads, ", H ", d.head_dim,
                           d.params.is_causal ? ", causal" : "", ")");
      });
  if (!ran) return {};
  return results;
}

}  // namespace

void register_cudnn_attention() {
  lax::register_attention_kernel(DeviceKind::cuda, attention);
}

std::int64_t cudnn_attention_executions() {
  return state().executions();
}

#endif

}  // namespace flaxpp::cuda
