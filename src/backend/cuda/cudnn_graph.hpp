// The generic part of flaxpp's use of cuDNN's graph API (backend descriptors, no frontend
// header library): checked calls, descriptors owned by RAII, tensors, a plan finalized from the
// engine configurations cuDNN's heuristics offer, the plans kept by configuration, per-device
// handles bound to the backend's stream, and execution with a workspace from the backend's
// pool. cudnn_layer_norm.cpp and cudnn_conv.cpp build their operation graphs on it. Only in
// builds with cuDNN (FLAXPP_WITH_CUDNN).
#pragma once

#include <cudnn.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.hpp"
#include "flaxpp/core/dtype.hpp"
#include "flaxpp/core/error.hpp"

namespace flaxpp::cuda::cudnn {

// cuDNN refused something: the call, its status and cuDNN's own message.
struct Rejected : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws Rejected naming `what` unless `status` is success.
void check(cudnnStatus_t status, const char* what);

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

// CUDNN_DATA_BFLOAT16 / HALF for bf16 / f16, CUDNN_DATA_FLOAT otherwise.
cudnnDataType_t data_type(DType dtype);

using Dims = std::array<std::int64_t, 4>;
// A finalized tensor descriptor (16-byte aligned data); by_value: a host scalar in the pack.
std::unique_ptr<Descriptor> tensor(std::int64_t uid, cudnnDataType_t type,
                                   std::span<const std::int64_t> dims,
                                   std::span<const std::int64_t> strides, bool by_value = false);

// A finalized execution plan and everything it was built from.
struct Plan {
  std::vector<std::unique_ptr<Descriptor>> parts;  // tensors, operation, graph, configs
  std::unique_ptr<Descriptor> plan;
  std::int64_t workspace = 0;
};

// Finalizes `op` (alone in an operation graph) into `p` with the first engine configuration
// cuDNN's heuristics offer (mode A, then the fallback list) that finalizes, skipping engines
// with a numerical note in `excluded` (CUDNN_NUMERICAL_NOTE_TENSOR_CORE: TF32 for float32
// data); Rejected with every configuration's reason when none does.
void finish_plan(Plan& p, cudnnHandle_t handle, const Descriptor& op,
                 std::span<const cudnnBackendNumericalNote_t> excluded = {});

// `gpu`'s device's handle, bound to the backend's stream; nullptr (said once on stderr) when
// cuDNN cannot start there (its sub-libraries not found, say), or when it does not exist yet
// and `create` is false (inside a CUDA graph recording, where creating it cannot be recorded).
cudnnHandle_t handle_for(CudaBackend& gpu, bool create = true);

// Runs `plan` on the tensors of `uids` at `pointers`, with a workspace from gpu's pool (freed
// in stream order). Throws Rejected, or OutOfMemoryError when the workspace does not fit.
void execute(CudaBackend& gpu, cudnnHandle_t handle, const Plan& plan,
             const std::vector<std::int64_t>& uids, std::vector<void*> pointers);

// Execution plans (Entry holds one) kept by configuration, the kMaxPlans most recently used
// (each distinct shape has its own). An evicted or replaced plan is destroyed only while no CUDA
// graph is alive: a recorded graph may run the kernels it owns. A configuration cuDNN rejected
// is remembered, so that it goes straight to flaxpp's kernels afterwards.
template <class Key, class Entry>
class PlanCache {
 public:
  // Runs `body(handle)`, which finds or builds the plan for `key` (find, keep) and executes it,
  // returning whether it ran. False, for the caller to run flaxpp's kernel, where cuDNN cannot
  // start on `gpu`, `key` was rejected before, the workspace does not fit this time, or `body`
  // throws Rejected: the key is then remembered as rejected and `what()` (the configuration)
  // reported on stderr with cuDNN's reason. Inside a CUDA graph recording nothing is created
  // (cuDNN's handle and plans may allocate and synchronise): a configuration not prepared by an
  // eager call falls back there, without being remembered as rejected.
  template <class Body, class What>
  bool run(CudaBackend& gpu, const Key& key, Body&& body, What&& what) {
    std::lock_guard lock(mutex_);
    if (rejected_.count(key) != 0) return false;
    const bool recording = gpu.capturing();
    const cudnnHandle_t handle = handle_for(gpu, !recording);
    if (handle == nullptr || (recording && find(gpu, key) == nullptr)) return false;
    try {
      if (!body(handle)) return false;
      executions_.fetch_add(1);
      return true;
    } catch (const OutOfMemoryError&) {
      return false;  // no room for cuDNN's workspace this time: flaxpp's kernel needs none
    } catch (const Rejected& e) {
      if (recording) return false;  // decided by the eager calls, not inside a recording
      rejected_.insert(key);
      std::fprintf(stderr, "flaxpp: cuDNN %s unavailable (%s); using flaxpp's kernel\n",
                   std::string(what()).c_str(), e.what());
      return false;
    }
  }

  std::int64_t executions() const { return executions_.load(); }
  bool rejected(const Key& key) {
    std::lock_guard lock(mutex_);
    return rejected_.count(key) != 0;
  }

  // Within run's body: the entry for `key`, now the most recently used; nullptr when there is
  // none.
  Entry* find(CudaBackend& gpu, const Key& key) {
    release_retired(gpu);
    const auto it = kept_.find(key);
    if (it == kept_.end()) return nullptr;
    recent_.splice(recent_.end(), recent_, it->second.use);
    return &it->second.entry;
  }

  // Within run's body: keeps `entry` for `key`, replacing the one there, evicting the least
  // recently used past kMaxPlans.
  Entry& keep(CudaBackend& gpu, const Key& key, Entry entry) {
    if (const auto it = kept_.find(key); it != kept_.end()) retire(it);
    if (kept_.size() >= kMaxPlans) retire(kept_.find(recent_.front()));
    release_retired(gpu);
    const auto use = recent_.insert(recent_.end(), key);
    return kept_.emplace(key, Kept{std::move(entry), use}).first->second.entry;
  }

 private:
  static constexpr std::size_t kMaxPlans = 64;
  struct Kept {
    Entry entry;
    typename std::list<Key>::iterator use;  // its place in recent_
  };
  void retire(typename std::map<Key, Kept>::iterator it) {
    recent_.erase(it->second.use);
    retired_.push_back(std::move(it->second.entry));
    kept_.erase(it);
  }
  void release_retired(CudaBackend& gpu) {
    if (gpu.live_graphs() == 0) retired_.clear();
  }
  std::map<Key, Kept> kept_;
  std::list<Key> recent_;       // least recently used first
  std::vector<Entry> retired_;  // evicted while a CUDA graph was alive
  std::set<Key> rejected_;
  std::mutex mutex_;
  std::atomic<std::int64_t> executions_{0};
};

}  // namespace flaxpp::cuda::cudnn
