// cuDNN graph-API plumbing (cudnn_graph.hpp).
#include "backend/cuda/cudnn_graph.hpp"

#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "flaxpp/core/error.hpp"

namespace flaxpp::cuda::cudnn {

void check(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char message[512] = {};
  cudnnGetLastErrorString(message, sizeof(message));
  throw Rejected(detail::str(what, ": ", cudnnGetErrorString(status),
                             message[0] != '\0' ? detail::str(" (", message, ")") : ""));
}

cudnnDataType_t data_type(DType dtype) {
  if (dtype == DType::bf16) return CUDNN_DATA_BFLOAT16;
  return dtype == DType::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

std::unique_ptr<Descriptor> tensor(std::int64_t uid, cudnnDataType_t type,
                                   std::span<const std::int64_t> dims,
                                   std::span<const std::int64_t> strides, bool by_value) {
  auto t = std::make_unique<Descriptor>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const std::int64_t alignment = 16;
  const auto rank = static_cast<std::int64_t>(dims.size());
  t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), rank)
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), rank)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
  if (by_value) {
    const bool yes = true;
    t->set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &yes);
  }
  t->finalize("tensor descriptor");
  return t;
}

namespace {

// Whether the engine of `config` carries one of the `excluded` numerical notes.
bool has_note(const Descriptor& config, std::span<const cudnnBackendNumericalNote_t> excluded) {
  if (excluded.empty()) return false;
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t engine_d = engine.get();
  std::int64_t count = 0;
  check(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine_d),
        "engine of a configuration");
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  check(cudnnBackendGetAttribute(engine_d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                 CUDNN_TYPE_NUMERICAL_NOTE, static_cast<std::int64_t>(notes.size()),
                                 &count, notes.data()),
        "numerical notes of an engine");
  for (std::int64_t i = 0; i < count; ++i)
    for (const cudnnBackendNumericalNote_t note : excluded)
      if (notes[static_cast<std::size_t>(i)] == note) return true;
  return false;
}

}  // namespace

void finish_plan(Plan& p, cudnnHandle_t handle, const Descriptor& op,
                 std::span<const cudnnBackendNumericalNote_t> excluded) {
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
  if (configs.empty()) throw Rejected("no engine configuration supports this operation");
  std::string reasons;
  for (const auto& config : configs) {
    try {
      if (has_note(*config, excluded)) {
        reasons += detail::str(reasons.empty() ? "" : "; ", "an engine with an excluded note");
        continue;
      }
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

namespace {

// Per-device handles (never destroyed: process lifetime) and the devices where cuDNN could
// not start.
struct Handles {
  std::mutex mutex;
  std::map<int, cudnnHandle_t> by_device;
  std::set<int> unusable;
};

Handles& handles() {
  static auto* const h = new Handles();
  return *h;
}

}  // namespace

cudnnHandle_t handle_for(CudaBackend& gpu, bool create) {
  Handles& s = handles();
  std::lock_guard lock(s.mutex);
  const int device = gpu.device().index;
  if (auto it = s.by_device.find(device); it != s.by_device.end()) return it->second;
  if (s.unusable.count(device) != 0 || !create) return nullptr;
  cudnnHandle_t h = nullptr;
  cudnnStatus_t status = cudnnCreate(&h);
  if (status == CUDNN_STATUS_SUCCESS) {
    status = cudnnSetStream(h, gpu.stream());
    if (status != CUDNN_STATUS_SUCCESS) (void)cudnnDestroy(h);
  }
  if (status != CUDNN_STATUS_SUCCESS) {
    s.unusable.insert(device);
    std::fprintf(stderr,
                 "flaxpp: cuDNN unavailable on cuda:%d (%s); flaxpp's kernels are used instead. "
                 "Where cuDNN comes from the nvidia-cudnn wheel, put its lib/ on "
                 "LD_LIBRARY_PATH\n",
                 device, cudnnGetErrorString(status));
    return nullptr;
  }
  s.by_device[device] = h;
  return h;
}

void execute(CudaBackend& gpu, cudnnHandle_t handle, const Plan& plan,
             const std::vector<std::int64_t>& uids, std::vector<void*> pointers) {
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
}  // the workspace is freed in stream order, after the execution

}  // namespace flaxpp::cuda::cudnn
