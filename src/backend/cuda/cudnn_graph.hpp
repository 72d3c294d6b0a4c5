// The generic part of flaxpp's use of cuDNN's graph API (backend descriptors, no frontend
// header library): checked calls, descriptors owned by RAII, tensors, a plan finalized from the
// engine configurations cuDNN's heuristics offer, per-device handles bound to the backend's
// stream, and execution with a workspace from the backend's pool. cudnn_layer_norm.cpp builds
// its operation graphs on it. Only in builds with cuDNN (FLAXPP_WITH_CUDNN).
#pragma once

#include <cudnn.h>

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "backend/cuda/cuda_backend.hpp"
#include "flaxpp/core/dtype.hpp"

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
std::unique_ptr<Descriptor> tensor(std::int64_t uid, cudnnDataType_t type, Dims dims, Dims strides,
                                   bool by_value = false);

// A finalized execution plan and everything it was built from.
struct Plan {
  std::vector<std::unique_ptr<Descriptor>> parts;  // tensors, operation, graph, configs
  std::unique_ptr<Descriptor> plan;
  std::int64_t workspace = 0;
};

// Finalizes `op` (alone in an operation graph) into `p` with the first engine configuration
// cuDNN's heuristics offer (mode A, then the fallback list) that finalizes; Rejected with every
// configuration's reason when none does.
void finish_plan(Plan& p, cudnnHandle_t handle, const Descriptor& op);

// `gpu`'s device's handle, bound to the backend's stream; nullptr (said once on stderr) when
// cuDNN cannot start there (its sub-libraries not found, say), or when it does not exist yet
// and `create` is false (inside a CUDA graph recording, where creating it cannot be recorded).
cudnnHandle_t handle_for(CudaBackend& gpu, bool create = true);

// Runs `plan` on the tensors of `uids` at `pointers`, with a workspace from gpu's pool (freed
// in stream order). Throws Rejected, or OutOfMemoryError when the workspace does not fit.
void execute(CudaBackend& gpu, cudnnHandle_t handle, const Plan& plan,
             const std::vector<std::int64_t>& uids, std::vector<void*> pointers);

}  // namespace flaxpp::cuda::cudnn
