// The record of bad indices found on the GPU, read at the backend's synchronisations.
#include "backend/cuda/cuda_index_faults.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <iostream>

#include "backend/cuda/cuda_check.hpp"
#include "flaxpp/ir/lax.hpp"

namespace flaxpp::cuda {

IndexFaults::IndexFaults() {
  void* host = nullptr;
  FLAXPP_CUDA_CHECK(cudaHostAlloc(&host, sizeof(kernels::IndexFault), cudaHostAllocMapped | cudaHostAllocPortable));
  host_ = static_cast<kernels::IndexFault*>(host);
  std::memset(host_, 0, sizeof(kernels::IndexFault));
  void* device = nullptr;
  const cudaError_t err = cudaHostGetDevicePointer(&device, host, 0);
  if (err != cudaSuccess) {
    (void)cudaFreeHost(host);
    (void)cudaGetLastError();
    FLAXPP_CUDA_CHECK(err);
  }
  device_ = static_cast<kernels::IndexFault*>(device);
}

IndexFaults::~IndexFaults() {
  if (host_ != nullptr && cudaFreeHost(host_) != cudaSuccess) {
    std::cerr << "flaxpp: freeing the CUDA index-fault record failed: "
              << cudaGetErrorString(cudaGetLastError()) << "\n";
  }
}

void IndexFaults::raise_pending() const {
  // The kernels that wrote the record have finished (the stream was synchronised), and the
  // record is host memory: a plain read sees their writes.
  const auto* seen = static_cast<volatile const std::int32_t*>(&host_->seen);
  if (*seen == 0) return;
  std::unique_lock lock(mutex_);
  if (*seen == 0) return;  // another thread raised it
  const kernels::IndexFault fault = *host_;
  std::memset(host_, 0, sizeof(kernels::IndexFault));
  lock.unlock();
  const char* op = fault.op == kernels::IndexedOp::take ? "take" : "scatter_add";
  throw lax::index_outside_error(
      detail::str(op, " on the GPU (found there and reported at the next synchronisation with "
                      "the host: the step that computed the index failed)"),
      fault.index, fault.position, "the indices", fault.rows);
}

}  // namespace flaxpp::cuda
