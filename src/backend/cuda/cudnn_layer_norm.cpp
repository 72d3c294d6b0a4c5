// cuDNN's LayerNorm forward and backward as graph-API operation graphs (cudnn_graph.hpp's
// plumbing; cudnn_layer_norm.hpp says what each entry point does). Tensors follow cuDNN's
// LayerNorm convention: x as (rows, f, 1, 1) normalised over f, scale/bias (1, f, 1, 1),
// statistics (rows, 1, 1, 1) in float32, epsilon a by-value float32 scalar.
#include "backend/cuda/cudnn_layer_norm.hpp"

#include "backend/cuda/cuda_eval.hpp"

#ifdef FLAXPP_WITH_CUDNN
#include <atomic>
#include <cstdio>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cudnn_graph.hpp"
#include "flaxpp/core/error.hpp"
#endif

namespace flaxpp::cuda {

#ifndef FLAXPP_WITH_CUDNN

bool cudnn_built() {
  return false;
}
bool cudnn_layer_norm_usable(CudaBackend&, bool, DType, std::int64_t, std::int64_t) {
  return false;
}
std::int64_t cudnn_layer_norm_executions() {
  return 0;
}
bool cudnn_layer_norm_forward(CudaBackend&, DType, std::int64_t, std::int64_t, const void*,
                              const void*, const void*, double, void*, void*, void*,
                              const ParamsAsFloat&) {
  return false;
}
bool cudnn_layer_norm_dx(CudaBackend&, DType, std::int64_t, std::int64_t, const void*, const void*,
                         const void*, const void*, const void*, void*, void*, void*,
                         const ParamsAsFloat&) {
  return false;
}

#else

namespace {

using cudnn::Descriptor;
using cudnn::Dims;
using cudnn::Plan;
using cudnn::Rejected;
using cudnn::tensor;
using cudnn::data_type;
using cudnn::finish_plan;

// Unique ids of the tensors in a variant pack.
enum Uid : std::int64_t {
  kX = 1,
  kScale,
  kBias,
  kEpsilon,
  kY,
  kMean,
  kInvVar,
  kDy,
  kDx,
  kDScale,
  kDBias
};


// The tensor kinds of a LayerNorm over (rows, f): x-shaped (x's dtype), parameter-shaped (scale,
// bias and their gradients: x's dtype, or float32 where cuDNN takes only that) and statistics
// (float32).
struct Layout {
  Layout(DType dtype, bool float_params, std::int64_t rows, std::int64_t f)
      : type(data_type(dtype)),
        param_type(float_params ? CUDNN_DATA_FLOAT : type),
        x_dims{rows, f, 1, 1},
        p_dims{1, f, 1, 1},
        s_dims{rows, 1, 1, 1},
        strides{f, 1, f, f} {}
  std::unique_ptr<Descriptor> x_like(Uid uid) const { return tensor(uid, type, x_dims, strides); }
  std::unique_ptr<Descriptor> param(Uid uid) const {
    return tensor(uid, param_type, p_dims, strides);
  }
  std::unique_ptr<Descriptor> stat(Uid uid) const {
    return tensor(uid, CUDNN_DATA_FLOAT, s_dims, kOnes);
  }
  static constexpr Dims kOnes{1, 1, 1, 1};
  cudnnDataType_t type, param_type;
  Dims x_dims, p_dims, s_dims, strides;
};

Plan forward_plan(cudnnHandle_t handle, DType dtype, bool float_params, std::int64_t rows,
                  std::int64_t f) {
  Plan p;
  const Layout l(dtype, float_params, rows, f);
  auto x = l.x_like(kX), y = l.x_like(kY), scale = l.param(kScale), bias = l.param(kBias);
  auto mean = l.stat(kMean), inv_var = l.stat(kInvVar);
  auto epsilon =
      tensor(kEpsilon, CUDNN_DATA_FLOAT, Layout::kOnes, Layout::kOnes, /*by_value=*/true);
  auto op = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR);
  const cudnnBackendNormMode_t mode = CUDNN_LAYER_NORM;
  const cudnnBackendNormFwdPhase_t phase = CUDNN_NORM_FWD_TRAINING;
  op->set(CUDNN_ATTR_OPERATION_NORM_FWD_MODE, CUDNN_TYPE_NORM_MODE, &mode)
      .set(CUDNN_ATTR_OPERATION_NORM_FWD_PHASE, CUDNN_TYPE_NORM_FWD_PHASE, &phase)
      .set(CUDNN_ATTR_OPERATION_NORM_FWD_XDESC, *x)
      .set(CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC, *mean)
      .set(CUDNN_ATTR_OPERATION_NORM_FWD_INV_VARIANCE_DESC, *inv_var)
      .set(CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC, *scale)
      .set(CUDNN_ATTR_OPERATION_NORM_FWD_BIAS_DESC, *bias)
      .set(CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC, *epsilon)
      .set(CUDNN_ATTR_OPERATION_NORM_FWD_YDESC, *y);
  op->finalize("LayerNorm forward operation");
  finish_plan(p, handle, *op);
  for (auto* part : {&x, &y, &scale, &bias, &mean, &inv_var, &epsilon, &op})
    p.parts.push_back(std::move(*part));
  return p;
}

Plan backward_plan(cudnnHandle_t handle, DType dtype, bool float_params, std::int64_t rows,
                   std::int64_t f) {
  Plan p;
  const Layout l(dtype, float_params, rows, f);
  auto x = l.x_like(kX), dy = l.x_like(kDy), dx = l.x_like(kDx);
  auto scale = l.param(kScale), dscale = l.param(kDScale), dbias = l.param(kDBias);
  auto mean = l.stat(kMean), inv_var = l.stat(kInvVar);
  auto op = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR);
  const cudnnBackendNormMode_t mode = CUDNN_LAYER_NORM;
  // cuDNN 9 takes no epsilon here: the inverse standard deviation already includes it.
  op->set(CUDNN_ATTR_OPERATION_NORM_BWD_MODE, CUDNN_TYPE_NORM_MODE, &mode)
      .set(CUDNN_ATTR_OPERATION_NORM_BWD_XDESC, *x)
      .set(CUDNN_ATTR_OPERATION_NORM_BWD_MEAN_DESC, *mean)
      .set(CUDNN_ATTR_OPERATION_NORM_BWD_INV_VARIANCE_DESC, *inv_var)
      .set(CUDNN_ATTR_OPERATION_NORM_BWD_DYDESC, *dy)
      .set(CUDNN_ATTR_OPERATION_NORM_BWD_SCALE_DESC, *scale)
      .set(CUDNN_ATTR_OPERATION_NORM_BWD_DSCALE_DESC, *dscale)
      .set(CUDNN_ATTR_OPERATION_NORM_BWD_DBIAS_DESC, *dbias)
      .set(CUDNN_ATTR_OPERATION_NORM_BWD_DXDESC, *dx);
  op->finalize("LayerNorm backward operation");
  finish_plan(p, handle, *op);
  for (auto* part : {&x, &dy, &dx, &scale, &dscale, &dbias, &mean, &inv_var, &op})
    p.parts.push_back(std::move(*part));
  return p;
}

// A configuration: (device, forward, dtype, rows, f). Plans are built once per configuration and
// kept, the kMaxPlans most recently used of them (each distinct batch x sequence length has
// its own). A plan is destroyed only while no CUDA graph is alive: a recorded graph may run
// the kernels it owns. A configuration cuDNN rejected with both parameter types is remembered
// (and reported once) so that it goes straight to flaxpp's kernel afterwards.
using Key = std::tuple<int, bool, DType, std::int64_t, std::int64_t>;
constexpr std::size_t kMaxPlans = 64;

struct Built {
  Plan plan;
  bool float_params = false;  // cuDNN took only float32 parameters (desk review F9)
  std::list<Key>::iterator use;  // its place in State::recent
};

struct State {
  std::mutex mutex;
  std::map<Key, Built> plans;
  std::list<Key> recent;         // least recently used first
  std::vector<Plan> retired;     // evicted while a CUDA graph was alive
  std::set<Key> rejected;
  std::atomic<std::int64_t> executions{0};
};

State& state() {
  static auto* const s = new State();
  return *s;
}

// A plan for `key` with parameters of x's dtype, or float32 ones where `float_params`.
Plan build(cudnnHandle_t handle, const Key& key, bool float_params) {
  const auto& [device, forward, dtype, rows, f] = key;
  return forward ? forward_plan(handle, dtype, float_params, rows, f)
                 : backward_plan(handle, dtype, float_params, rows, f);
}

// The plan for `key`, built on first use: parameters of x's dtype, else float32 ones (also
// where `native_failed`: the native plan finalized but did not execute). With state().mutex
// held; Rejected when cuDNN takes neither.
Built& plan_for(CudaBackend& gpu, cudnnHandle_t handle, const Key& key, bool native_failed) {
  State& s = state();
  if (gpu.live_graphs() == 0) s.retired.clear();
  if (auto it = s.plans.find(key);
      it != s.plans.end() && !(native_failed && !it->second.float_params)) {
    s.recent.splice(s.recent.end(), s.recent, it->second.use);
    return it->second;
  }
  Built built;
  try {
    if (native_failed) throw Rejected("the plan with parameters of x's dtype did not execute");
    built.plan = build(handle, key, false);
  } catch (const Rejected& native) {
    try {
      built.plan = build(handle, key, true);
      built.float_params = true;
    } catch (const Rejected& as_float) {
      throw Rejected(detail::str(native.what(), "; with float32 parameters: ", as_float.what()));
    }
  }
  if (auto it = s.plans.find(key); it != s.plans.end()) {  // the native plan, replaced
    s.recent.erase(it->second.use);
    s.retired.push_back(std::move(it->second.plan));
    s.plans.erase(it);
  }
  if (s.plans.size() >= kMaxPlans) {
    auto oldest = s.plans.find(s.recent.front());
    s.retired.push_back(std::move(oldest->second.plan));
    s.plans.erase(oldest);
    s.recent.pop_front();
  }
  if (gpu.live_graphs() == 0) s.retired.clear();
  built.use = s.recent.insert(s.recent.end(), key);
  return s.plans.emplace(key, std::move(built)).first->second;
}

// Builds (once) and runs the plan for the configuration on the tensors of `uids`/`pointers`;
// the parameters at `param_slots` of `pointers` are replaced by float32 copies where the plan
// needs them. Inside a CUDA graph recording nothing is created (cuDNN's handle and plans may
// allocate and synchronise): a configuration not prepared by an eager call falls back there,
// without being remembered as rejected.
bool run(CudaBackend& gpu, bool forward, DType dtype, std::int64_t rows, std::int64_t f,
         const std::vector<std::int64_t>& uids, std::vector<void*> pointers,
         std::initializer_list<std::size_t> param_slots, const ParamsAsFloat& as_float) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const Key key{gpu.device().index, forward, dtype, rows, f};
  if (s.rejected.count(key) != 0) return false;
  const bool recording = gpu.capturing();
  const cudnnHandle_t handle = cudnn::handle_for(gpu, !recording);
  if (handle == nullptr || (recording && s.plans.count(key) == 0)) return false;
  bool native_failed = false;
  for (;;) {
    try {
      const Built& built = plan_for(gpu, handle, key, native_failed);
      std::vector<std::shared_ptr<Buffer>> copies;  // freed in stream order, after the execution
      std::vector<void*> args = pointers;
      if (built.float_params)
        for (const std::size_t slot : param_slots) {
          copies.push_back(as_float(args[slot]));
          args[slot] = copies.back()->data();
        }
      try {
        cudnn::execute(gpu, handle, built.plan, uids, std::move(args));
      } catch (const Rejected&) {
        // A native plan that finalized may still refuse to execute: try float32 parameters once.
        if (built.float_params || native_failed || recording) throw;
        native_failed = true;
        continue;
      }
      s.executions.fetch_add(1);
      return true;
    } catch (const OutOfMemoryError&) {
      return false;  // no room for cuDNN's workspace this time: flaxpp's kernel needs none
    } catch (const Rejected& e) {
      if (recording) return false;  // decided by the eager calls, not inside a recording
      s.rejected.insert(key);
      std::fprintf(stderr,
                   "flaxpp: cuDNN LayerNorm %s for %s[%lld, %lld] unavailable (%s); using "
                   "flaxpp's kernel\n",
                   forward ? "forward" : "backward", std::string(dtype_short_name(dtype)).c_str(),
                   static_cast<long long>(rows), static_cast<long long>(f), e.what());
      return false;
    }
  }
}

}  // namespace

bool cudnn_built() {
  return true;
}

bool cudnn_layer_norm_usable(CudaBackend& gpu, bool forward, DType dtype, std::int64_t rows,
                             std::int64_t f) {
  if (cudnn::handle_for(gpu, !gpu.capturing()) == nullptr) return false;
  std::lock_guard lock(state().mutex);
  return state().rejected.count(Key{gpu.device().index, forward, dtype, rows, f}) == 0;
}

std::int64_t cudnn_layer_norm_executions() {
  return state().executions.load();
}

bool cudnn_layer_norm_forward(CudaBackend& gpu, DType dtype, std::int64_t rows, std::int64_t f,
                              const void* x, const void* scale, const void* bias, double epsilon,
                              void* y, void* mean, void* inv_var, const ParamsAsFloat& as_float) {
  float eps = static_cast<float>(epsilon);  // by value: read when the plan executes
  return run(gpu, true, dtype, rows, f, {kX, kScale, kBias, kEpsilon, kY, kMean, kInvVar},
             {const_cast<void*>(x), const_cast<void*>(scale), const_cast<void*>(bias), &eps, y,
              mean, inv_var},
             {1, 2}, as_float);
}

bool cudnn_layer_norm_dx(CudaBackend& gpu, DType dtype, std::int64_t rows, std::int64_t f,
                         const void* x, const void* scale, const void* dy, const void* mean,
                         const void* inv_var, void* dx, void* dscale, void* dbias,
                         const ParamsAsFloat& as_float) {
  return run(gpu, false, dtype, rows, f, {kX, kScale, kDy, kMean, kInvVar, kDx, kDScale, kDBias},
             {const_cast<void*>(x), const_cast<void*>(scale), const_cast<void*>(dy),
              const_cast<void*>(mean), const_cast<void*>(inv_var), dx, dscale, dbias},
             {1}, as_float);
}

#endif  // FLAXPP_WITH_CUDNN

}  // namespace flaxpp::cuda
