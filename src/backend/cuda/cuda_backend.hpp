// The CUDA backend's memory: device buffers from the stream-ordered allocator (the device's
// default cudaMemPool, cudaMallocAsync on the backend's stream), pinned host buffers for
// offloaded residuals (cudaMallocHost). Never managed memory. Primitives run on the same
// stream (cuda_eval.hpp), so stream order alone makes allocation, compute and free safe. What it
// holds is in small owners, each releasing its resource: the streams (cuda_stream.hpp), the
// pinned-block cache (cuda_pinned_cache.hpp), the side-stream copies in flight
// (cuda_copy_tracker.hpp), the cuBLAS handle and workspace (cuda_blas_handle.hpp), the upload
// staging (cuda_staging.hpp), the index-fault flag (cuda_index_faults.hpp) and the state of its
// graph recordings (cuda_recording_state.hpp), which its allocations and frees consult.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>

#include "backend/cuda/cublaslt_bias_plans.hpp"
#include "backend/cuda/cuda_blas_handle.hpp"
#include "backend/cuda/cuda_copy_tracker.hpp"
#include "backend/cuda/cuda_index_faults.hpp"
#include "backend/cuda/cuda_pinned_cache.hpp"
#include "backend/cuda/cuda_recording_state.hpp"
#include "backend/cuda/cuda_staging.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "flaxpp/core/backend.hpp"

namespace flaxpp::cuda {

// Number of CUDA devices the runtime sees (0 when there is no driver or no GPU).
int device_count() noexcept;

class CudaBackend final : public Backend {
  friend class CudaGraph;

 public:
  explicit CudaBackend(int index);
  ~CudaBackend() override;

  cudaStream_t stream() const { return stream_.get(); }
  void* stream_handle() const override { return stream_.get(); }
  // The device's memory in bytes (larger requests are out of memory at once).
  std::size_t total_memory() const { return total_memory_; }
  // Whether work queued now is being recorded into a CUDA graph (capture()).
  bool capturing() const override { return recording_.capturing(); }
  // How many recorded CUDA graphs exist: what they run must stay loaded (cuDNN's plans).
  int live_graphs() const { return recording_.live_graphs(); }
  // Waits for both of the backend's streams (compute and offload copies).
  void synchronize() const override;
  // This device's cuBLAS handle, bound to stream() with its own workspace; created on first
  // use, which cannot be inside a recording.
  cublasHandle_t blas();
  // The workspace blas() set (kBlasWorkspaceBytes), which cuBLASLt calls take explicitly.
  void* blas_workspace() {
    blas();
    return blas_.workspace();
  }
  // The cuBLASLt bias-epilogue plans chosen for this device so far (dot_general_bias).
  LtBiasPlans& lt_bias_plans() { return lt_bias_plans_; }
  // Where take and scatter_add kernels record a bad index; raised at the next synchronisation
  // (synchronize, a copy to the host).
  const IndexFaults& index_faults() const { return *index_faults_; }
  // Orders work queued next on stream() after any side-stream copy still reading or writing
  // `ptr`: call it before writing an existing buffer in place (a donated operand).
  void before_write(const void* ptr) const { copies_.order_after(ptr, stream()); }
  // Buffers (by serial) that a recording kept but never launched: they were never allocated,
  // so their frees are skipped.
  void forget_allocations(const std::unordered_set<std::uint64_t>& never_made) {
    recording_.forget(never_made);
  }
  // Hands the pool's unused memory back to the driver, where a CUDA graph's memory comes from.
  void trim_pool();

  static constexpr std::size_t kBlasWorkspaceBytes = BlasHandle::kWorkspaceBytes;

 protected:
  void* allocate_impl(std::int64_t bytes, MemoryKind kind, std::uint64_t serial) override;
  void deallocate_impl(const Allocation& allocation) noexcept override;
  void copy_to_host_impl(const void* src, void* dst, std::int64_t bytes) const override;
  // From pinned memory directly; from pageable memory through a pinned staging slot (or, for
  // large copies, synchronously), so that the source may be freed on return.
  void copy_from_host_impl(const void* src, void* dst, std::int64_t bytes) const override;
  // Device to device on the stream, without waiting; into pinned host memory, waited for.
  void copy_impl(const Buffer& src, std::int64_t src_offset, Buffer& dst, std::int64_t dst_offset,
                 std::int64_t bytes) const override;
  // Device -> pinned host (offloading a residual) runs on a side stream and returns at once;
  // pinned host -> device waits for that copy on the GPU, not the host. Other copies: copy().
  void copy_async_impl(const Buffer& src, Buffer& dst, std::int64_t bytes) override;
  void fill_impl(Buffer& dst, const void* value, std::size_t itemsize,
                 std::int64_t count) const override;
  // Stream capture of stream() into a CUDA graph (cuda_graph.cpp).
  std::unique_ptr<DeviceGraph> capture_impl(const std::function<void()>& work,
                                            std::string& why) override;

 private:
  // `index`, made the current device (before the streams are made on it).
  static int selected(int index);
  // Makes the main stream wait (on the GPU) for a side-stream copy that involves `ptr`.
  void wait_for_copy(const void* ptr) const { copies_.order_after(ptr, stream()); }
  // Waits for both streams, then hands the memory cached for graphs and the pool's unused
  // memory back to the driver: the last try before an allocation is out of memory.
  void release_cached_memory();
  // While recording: notes that `what` cannot be recorded (the recording then fails) and throws
  // a DeviceError saying so, which ends the recorded work.
  void refuse_in_capture(const char* what) const;
  // Ends the record of a recording (begun or not): the buffers released during it are freed.
  RecordingState::Record end_recording();

  // Declared in the order of making; destroyed in reverse, the streams last.
  int index_;
  Stream stream_;
  Stream copy_stream_;  // offload copies
  // The device's default pool (not owned: the driver's).
  cudaMemPool_t pool_ = nullptr;
  std::size_t total_memory_ = 0;  // the device's memory: larger requests are out of memory
  mutable HostStaging staging_;   // pageable uploads
  PinnedCache pinned_;
  CopyTracker copies_;
  // The recordings' state; mutable: a const call refused inside a recording fails it.
  mutable RecordingState recording_{index_, stream_.get()};
  BlasHandle blas_;
  std::unique_ptr<IndexFaults> index_faults_;  // made once the device is current
  LtBiasPlans lt_bias_plans_;  // host-side descriptors only, destroyed with the backend
};

}  // namespace flaxpp::cuda
