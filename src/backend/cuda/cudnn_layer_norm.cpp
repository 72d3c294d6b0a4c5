// cuDNN's LayerNorm forward and backward through the graph API's backend descriptors
// (cudnn_layer_norm.hpp). Tensors follow cuDNN's LayerNorm convention: x as (rows, f, 1, 1)
// normalised over f, scale/bias (1, f, 1, 1), statistics (rows, 1, 1, 1) in float32, epsilon a
// by-value float32 scalar.
#include "backend/cuda/cudnn_layer_norm.hpp"

#include "backend/cuda/cuda_eval.hpp"

#ifdef FLAXPP_WITH_CUDNN
#include <cudnn.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
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
                              const void*, const void*, double, void*, void*, void*) {
  return false;
}
bool cudnn_layer_norm_dx(CudaBackend&, DType, std::int64_t, std::int64_t, const void*, const void*,
                         const void*, const void*, const void*, void*, void*, void*) {
  return false;
}

#else

namespace {

// cuDNN refused something: the call, its status and cuDNN's own message.
struct Rejected : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char message[512] = {};
  cudnnGetLastErrorString(message, sizeof(message));
  throw Rejected(detail::str(what, ": ", cudnnGetErrorString(status),
                             message[0] != '\0' ? detail::str(" (", message, ")") : ""));
}

// One backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    check(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  ~Descriptor() {
    if (d_ != nullptr) (void)cudnnBackendDestroyDescriptor(d_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  template <class T>
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                  const T* values, std::int64_t count = 1) {
    check(cudnnBackendSetAttribute(d_, name, type, count, values), "cudnnBackendSetAttribute");
    return *this;
  }
  Descriptor& set(cudnnBackendAttributeName_t name, const Descriptor& value) {
    const cudnnBackendDescriptor_t d = value.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &d);
  }
  void finalize(const char* what) { check(cudnnBackendFinalize(d_), what); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

cudnnDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    case DType::f16:
      return CUDNN_DATA_HALF;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

using Dims = std::array<std::int64_t, 4>;

std::unique_ptr<Descriptor> tensor(std::int64_t uid, cudnnDataType_t type, Dims dims, Dims strides,
                                   bool by_value = false) {
  auto t = std::make_unique<Descriptor>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const std::int64_t alignment = 16;
  t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4)
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
  if (by_value) {
    const bool yes = true;
    t->set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &yes);
  }
  t->finalize("tensor descriptor");
  return t;
}

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

// A finalized execution plan and everything it was built from.
struct Plan {
  std::vector<std::unique_ptr<Descriptor> > parts;  // tensors, operation, graph, configs
  std::unique_ptr<Descriptor> plan;
  std::int64_t workspace = 0;
};

// The first engine configuration cuDNN's heuristics offer that finalizes into a plan.
void finish_plan(Plan& p, cudnnHandle_t handle, const Descriptor& op) {
  auto graph = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  const cudnnBackendDescriptor_t op_d = op.get();
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, &op_d)
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  graph->finalize("operation graph");
  // Heuristics mode A first, then the fallback list, as cudnn-frontend's LayerNorm samples do.
  std::vector<std::unique_ptr<Descriptor> > configs;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    try {
      auto heur = std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      heur->set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *graph)
          .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
      heur->finalize("engine heuristics");
      std::int64_t count = 0;
      check(cudnnBackendGetAttribute(heur->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
            "engine heuristics results");
      std::vector<cudnnBackendDescriptor_t> raw;
      const std::size_t first = configs.size();
      for (std::int64_t i = 0; i < count; ++i) {
        configs.push_back(std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
        raw.push_back(configs.back()->get());
      }
      if (count > 0)
        check(cudnnBackendGetAttribute(heur->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, raw.data()),
              "engine heuristics results");
      configs.resize(first + static_cast<std::size_t>(count));
      p.parts.push_back(std::move(heur));
    } catch (const Rejected&) {  // this mode has nothing: try the next
    }
  }
  if (configs.empty()) throw Rejected("no engine configuration supports this LayerNorm");
  std::string reasons;
  for (const auto& config : configs) {
    try {
      auto plan = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle)
          .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *config);
      plan->finalize("execution plan");
      check(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, nullptr, &p.workspace),
            "workspace size");
      p.plan = std::move(plan);
      break;
    } catch (const Rejected& e) {
      reasons += detail::str(reasons.empty() ? "" : "; ", e.what());
    }
  }
  if (!p.plan) throw Rejected(detail::str("no engine configuration finalized: ", reasons));
  p.parts.push_back(std::move(graph));
  for (auto& c : configs)
    p.parts.push_back(std::move(c));
}

// The tensor kinds of a LayerNorm over (rows, f): x-shaped, parameter-shaped (scale, bias and
// their gradients, x's dtype) and statistics (float32).
struct Layout {
  Layout(DType dtype, std::int64_t rows, std::int64_t f)
      : type(data_type(dtype)),
        x_dims{rows, f, 1, 1},
        p_dims{1, f, 1, 1},
        s_dims{rows, 1, 1, 1},
        strides{f, 1, f, f} {}
  std::unique_ptr<Descriptor> x_like(Uid uid) const { return tensor(uid, type, x_dims, strides); }
  std::unique_ptr<Descriptor> param(Uid uid) const { return tensor(uid, type, p_dims, strides); }
  std::unique_ptr<Descriptor> stat(Uid uid) const {
    return tensor(uid, CUDNN_DATA_FLOAT, s_dims, kOnes);
  }
  static constexpr Dims kOnes{1, 1, 1, 1};
  cudnnDataType_t type;
  Dims x_dims, p_dims, s_dims, strides;
};

Plan forward_plan(cudnnHandle_t handle, DType dtype, std::int64_t rows, std::int64_t f) {
  Plan p;
  const Layout l(dtype, rows, f);
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

Plan backward_plan(cudnnHandle_t handle, DType dtype, std::int64_t rows, std::int64_t f) {
  Plan p;
  const Layout l(dtype, rows, f);
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

// Per-device handles and plans; a configuration cuDNN rejected is remembered (and reported
// once) so that it goes straight to flaxpp's kernel afterwards.
struct State {
  std::mutex mutex;
  std::map<int, cudnnHandle_t> handles;  // by device; never destroyed (process lifetime)
  std::set<int> unusable;                // devices where cuDNN could not start
  std::map<std::tuple<int, bool, DType, std::int64_t, std::int64_t>, Plan> plans;
  std::set<std::tuple<int, bool, DType, std::int64_t, std::int64_t> > rejected;
  std::atomic<std::int64_t> executions{0};
};

State& state() {
  static auto* const s = new State();
  return *s;
}

// This device's handle, bound to the backend's stream; nullptr (said once on stderr) when
// cuDNN cannot start here. With state().mutex held.
cudnnHandle_t handle_for(CudaBackend& gpu) {
  State& s = state();
  const int device = gpu.device().index;
  if (auto it = s.handles.find(device); it != s.handles.end()) return it->second;
  if (s.unusable.count(device) != 0) return nullptr;
  cudnnHandle_t h = nullptr;
  cudnnStatus_t status = cudnnCreate(&h);
  if (status == CUDNN_STATUS_SUCCESS) {
    status = cudnnSetStream(h, gpu.stream());
    if (status != CUDNN_STATUS_SUCCESS) (void)cudnnDestroy(h);
  }
  if (status != CUDNN_STATUS_SUCCESS) {
    s.unusable.insert(device);
    std::fprintf(stderr,
                 "flaxpp: cuDNN unavailable on cuda:%d (%s); LayerNorm uses flaxpp's kernels\n",
                 device, cudnnGetErrorString(status));
    return nullptr;
  }
  s.handles[device] = h;
  return h;
}

// Builds (once) and runs the plan for `key` on the tensors of `uids`/`pointers`.
bool run(CudaBackend& gpu, bool forward, DType dtype, std::int64_t rows, std::int64_t f,
         const std::vector<std::int64_t>& uids, std::vector<void*> pointers) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const auto key = std::make_tuple(gpu.device().index, forward, dtype, rows, f);
  if (s.rejected.count(key) != 0) return false;
  const cudnnHandle_t handle = handle_for(gpu);
  if (handle == nullptr) return false;
  try {
    auto it = s.plans.find(key);
    if (it == s.plans.end())
      it = s.plans
               .emplace(key, forward ? forward_plan(handle, dtype, rows, f)
                                     : backward_plan(handle, dtype, rows, f))
               .first;
    const Plan& plan = it->second;
    std::shared_ptr<Buffer> workspace;
    if (plan.workspace > 0) workspace = gpu.allocate(plan.workspace);
    void* workspace_ptr = workspace ? workspace->data() : nullptr;
    Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(),
             static_cast<std::int64_t>(uids.size()))
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers.data(),
             static_cast<std::int64_t>(pointers.size()))
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace_ptr);
    pack.finalize("variant pack");
    check(cudnnBackendExecute(handle, plan.plan->get(), pack.get()), "cudnnBackendExecute");
    s.executions.fetch_add(1);
    return true;  // the workspace is freed in stream order, after the execution
  } catch (const OutOfMemoryError&) {
    return false;  // no room for cuDNN's workspace this time: flaxpp's kernel needs none
  } catch (const Rejected& e) {
    s.rejected.insert(key);
    std::fprintf(stderr,
                 "flaxpp: cuDNN LayerNorm %s for %s[%lld, %lld] unavailable (%s); using flaxpp's "
                 "kernel\n",
                 forward ? "forward" : "backward", std::string(dtype_short_name(dtype)).c_str(),
                 static_cast<long long>(rows), static_cast<long long>(f), e.what());
    return false;
  }
}

}  // namespace

bool cudnn_built() {
  return true;
}

bool cudnn_layer_norm_usable(CudaBackend& gpu, bool forward, DType dtype, std::int64_t rows,
                             std::int64_t f) {
  std::lock_guard lock(state().mutex);
  return handle_for(gpu) != nullptr &&
         state().rejected.count(std::make_tuple(gpu.device().index, forward, dtype, rows, f)) == 0;
}

std::int64_t cudnn_layer_norm_executions() {
  return state().executions.load();
}

bool cudnn_layer_norm_forward(CudaBackend& gpu, DType dtype, std::int64_t rows, std::int64_t f,
                              const void* x, const void* scale, const void* bias, double epsilon,
                              void* y, void* mean, void* inv_var) {
  float eps = static_cast<float>(epsilon);  // by value: read when the plan executes
  return run(gpu, true, dtype, rows, f, {kX, kScale, kBias, kEpsilon, kY, kMean, kInvVar},
             {const_cast<void*>(x), const_cast<void*>(scale), const_cast<void*>(bias), &eps, y,
              mean, inv_var});
}

bool cudnn_layer_norm_dx(CudaBackend& gpu, DType dtype, std::int64_t rows, std::int64_t f,
                         const void* x, const void* scale, const void* dy, const void* mean,
                         const void* inv_var, void* dx, void* dscale, void* dbias) {
  return run(gpu, false, dtype, rows, f, {kX, kScale, kDy, kMean, kInvVar, kDx, kDScale, kDBias},
             {const_cast<void*>(x), const_cast<void*>(scale), const_cast<void*>(dy),
              const_cast<void*>(mean), const_cast<void*>(inv_var), dx, dscale, dbias});
}

#endif  // FLAXPP_WITH_CUDNN

}  // namespace flaxpp::cuda
