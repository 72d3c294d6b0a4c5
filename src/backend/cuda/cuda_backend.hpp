// The CUDA backend's memory: device buffers from the stream-ordered allocator (a
// cudaMemPool per device, cudaMallocAsync on the backend's stream), pinned host buffers for
// offloaded residuals (cudaMallocHost). Never managed memory. Primitives run on the same
// stream (cuda_eval.hpp), so stream order alone makes allocation, compute and free safe.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/cuda/cublaslt_bias_plans.hpp"
#include "backend/cuda/cuda_index_faults.hpp"
#include "backend/cuda/cuda_staging.hpp"
#include "flaxpp/core/backend.hpp"

namespace flaxpp::cuda {

// Number of CUDA devices the runtime sees (0 when there is no driver or no GPU).
int device_count() noexcept;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index);
  ~CudaBackend() override;

  cudaStream_t stream() const { return stream_; }
  void* stream_handle() const override { return stream_; }
  // The device's memory in bytes (larger requests are out of memory at once).
  std::size_t total_memory() const { return total_memory_; }
  // Whether work queued now is being recorded into a CUDA graph (capture()).
  bool capturing() const override { return capturing_.load(std::memory_order_acquire); }
  // How many recorded CUDA graphs exist: what they run must stay loaded (cuDNN's plans).
  int live_graphs() const { return live_graphs_.load(); }
  // Waits for both of the backend's streams (compute and offload copies).
  void synchronize() const override;
  // This device's cuBLAS handle, bound to stream() with its own workspace; created on first
  // use, which cannot be inside a recording.
  cublasHandle_t blas();
  // The workspace blas() set (kBlasWorkspaceBytes), which cuBLASLt calls take explicitly.
  void* blas_workspace() {
    blas();
    return blas_workspace_;
  }
  // The cuBLASLt bias-epilogue plans chosen for this device so far (dot_general_bias).
  LtBiasPlans& lt_bias_plans() { return lt_bias_plans_; }
  // Where take and scatter_add kernels record a bad index; raised at the next synchronisation
  // (synchronize, a copy to the host).
  const IndexFaults& index_faults() const { return *index_faults_; }
  // Orders work queued next on stream() after any side-stream copy still reading or writing
  // `ptr`: call it before writing an existing buffer in place (a donated operand).
  void before_write(const void* ptr) const { wait_for_copy(ptr); }
  // Buffers (by serial) that a recording kept but never launched: they were never allocated,
  // so their frees are skipped.
  void forget_allocations(const std::unordered_set<std::uint64_t>& never_made);
  // Hands the pool's unused memory back to the driver, where a CUDA graph's memory comes from.
  void trim_pool();

  // cuBLAS's workspace, one per handle, made before any recording so that eager and recorded
  // products see the same configuration (desk review F4). Not counted in memory_stats().
  static constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20;

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
  int index_;
  cudaStream_t stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  std::size_t total_memory_ = 0;  // the device's memory: larger requests are out of memory
  // Makes the main stream wait (on the GPU) for a side-stream copy that involves `ptr`.
  void wait_for_copy(const void* ptr) const;
  // Waits for both streams, then hands the memory cached for graphs and the pool's unused
  // memory back to the driver: the last try before an allocation is out of memory.
  void release_cached_memory();
  // A cached pinned block of `size` bytes that no queued work uses any more, or nullptr.
  void* take_pinned(std::size_t size);

  cudaStream_t copy_stream_ = nullptr;  // offload copies
  mutable HostStaging staging_;         // pageable uploads
  // Guards pending_, never_made_, capture_ and retired_graphs_ (frees come from any thread).
  mutable std::mutex mutex_;
  // Buffers (source and destination) of side-stream copies, with the event that completes
  // the copy; an entry lives until its buffer is freed.
  std::unordered_map<const void*, std::shared_ptr<CUevent_st>> pending_;
  std::unordered_set<std::uint64_t> never_made_;  // serials of buffers a recording never made
  // Freed pinned blocks by page-rounded size, with events on both streams at their release.
  struct PinnedBlock {
    void* ptr;
    std::shared_ptr<CUevent_st> main_done, copy_done;
  };
  std::mutex pinned_mutex_;
  std::map<std::size_t, std::vector<PinnedBlock>> pinned_cache_;
  std::size_t pinned_cached_ = 0;
  // While capturing: the graph allocations made so far (by serial), pre-existing buffers
  // released (their frees wait for the end of the capture, which then fails), and the first
  // problem seen.
  struct Capture {
    std::unordered_set<std::uint64_t> made;
    std::vector<Allocation> deferred_frees;
    std::string problem;
    bool failed = false;
    // Notes that the capture fails, and the first reason why (noexcept: frees call it).
    void fail(const char* why) noexcept {
      if (failed) return;
      failed = true;
      try {
        problem = why;
      } catch (...) {  // no memory for the message: capture_impl says something shorter
      }
    }
  };
  // While capturing: notes that `what` cannot be recorded (the capture then fails) and throws
  // a DeviceError saying so, which ends the recorded work.
  void refuse_in_capture(const char* what) const;
  // Ends the record of a capture (begun or not): the buffers released during it are freed, the
  // graphs dropped during it destroyed. Returns the record.
  Capture end_capture_record();
  mutable std::optional<Capture> capture_;  // guarded by mutex_
  std::atomic<bool> capturing_{false};      // capture_.has_value(), readable without the lock
  std::atomic<int> live_graphs_{0};
  // A recorded graph no longer wanted: destroyed now or, while a recording captures stream()
  // (where waiting for the stream is illegal), when that recording ends (cuda_graph.cpp).
  struct RetiredGraph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
  };
  void retire_graph(RetiredGraph g) noexcept;
  void destroy_retired_graphs() noexcept;              // unless capturing
  void destroy_graph_locked(RetiredGraph g) noexcept;  // mutex_ held, not capturing
  std::vector<RetiredGraph> retired_graphs_;           // guarded by mutex_
  friend class CudaGraph;
  std::once_flag blas_once_;
  cublasHandle_t blas_ = nullptr;
  void* blas_workspace_ = nullptr;
  std::unique_ptr<IndexFaults> index_faults_;  // made once the device is current
  LtBiasPlans lt_bias_plans_;  // host-side descriptors only, destroyed with the backend
};

}  // namespace flaxpp::cuda
