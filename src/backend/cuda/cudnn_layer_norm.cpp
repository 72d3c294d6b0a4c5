// cuDNN's LayerNorm forward and backward as graph-API operation graphs (cudnn_graph.hpp's
// plumbing; cudnn_layer_norm.hpp says what each entry point does). Tensors follow cuDNN's
// LayerNorm convention: x as (rows, f, 1, 1) normalised over f, scale/bias (1, f, 1, 1),
// statistics (rows, 1, 1, 1) in float32, epsilon a by-value float32 scalar.
#include "backend/cuda/cudnn_layer_norm.hpp"

#include "backend/cuda/cuda_eval.hpp"

#ifdef FLAXPP_WITH_CUDNN
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

using cudnn::data_type;
using cudnn::Descriptor;
using cudnn::Dims;
using cudnn::finish_plan;
using cudnn::Plan;
using cudnn::Rejected;
using cudnn::tensor;

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

// A configuration: (device, forward, dtype, rows, f); its plan is kept in a cudnn::PlanCache.
using Key = std::tuple<int, bool, DType, std::int64_t, std::int64_t>;

struct Built {
  Plan plan;
  bool float_params = false;  // cuDNN took only float32 parameters (desk review F9)
};

using State = cudnn::PlanCache<Key, Built>;

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
  if (Built* kept = s.find(gpu, key); kept != nullptr && !(native_failed && !kept->float_params))
    return *kept;
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
  return s.keep(gpu, key, std::move(built));  // replaces a native plan that did not execute
}

// Builds (once) and runs the plan for the configuration on the tensors of `uids`/`pointers`;
// the parameters at `param_slots` of `pointers` are replaced by float32 copies where the plan
// needs them (cudnn::PlanCache::run says when it returns false).
bool run(CudaBackend& gpu, bool forward, DType dtype, std::int64_t rows, std::int64_t f,
         const std::vector<std::int64_t>& uids, std::vector<void*> pointers,
         std::initializer_list<std::size_t> param_slots, const ParamsAsFloat& as_float) {
  const Key key{gpu.device().index, forward, dtype, rows, f};
  const bool recording = gpu.capturing();
  return state().run(
      gpu, key,
      [&](cudnnHandle_t handle) {
        bool native_failed = false;
        for (;;) {
          const Built& built = plan_for(gpu, handle, key, native_failed);
          std::vector<std::shared_ptr<Buffer> > copies;  // freed in stream order, after the run
          std::vector<void*> args = pointers;
          if (built.float_params)
            for (const std::size_t slot : param_slots) {
              copies.push_back(as_float(args[slot]));
              args[slot] = copies.back()->data();
            }
          try {
            cudnn::execute(gpu, handle, built.plan, uids, std::move(args));
            return true;
          } catch (const Rejected&) {
            // A native plan that finalized may still refuse to execute: float32 parameters once.
            if (built.float_params || native_failed || recording) throw;
            native_failed = true;
          }
        }
      },
      [&] {
        return detail::str("LayerNorm ", forward ? "forward" : "backward", " for ",
                           dtype_short_name(dtype), "[", rows, ", ", f, "]");
      });
}

}  // namespace

bool cudnn_built() {
  return true;
}

bool cudnn_layer_norm_usable(CudaBackend& gpu, bool forward, DType dtype, std::int64_t rows,
                             std::int64_t f) {
  if (cudnn::handle_for(gpu, !gpu.capturing()) == nullptr) return false;
  return !state().rejected(Key{gpu.device().index, forward, dtype, rows, f});
}

std::int64_t cudnn_layer_norm_executions() {
  return state().executions();
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
