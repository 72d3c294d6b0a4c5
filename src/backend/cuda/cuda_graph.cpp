// CUDA graphs: CudaBackend::capture_impl records the work queued on the backend's stream (stream
// capture, with stream-ordered allocations becoming graph memory nodes) and CudaGraph replays
// it. A recording that fails (a synchronisation, a pageable copy, an error) leaves nothing
// behind: its kept buffers are forgotten, and the caller runs its work eagerly instead.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <utility>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_check.hpp"

namespace flaxpp::cuda {

class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(CudaBackend& backend, cudaGraph_t graph, cudaGraphExec_t exec,
            std::unordered_set<std::uint64_t> kept)
      : backend_(backend), graph_(graph), exec_(exec), kept_(std::move(kept)) {
    ++backend_.live_graphs_;
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  ~CudaGraph() override {
    // Destructors never throw: report and go on. A recording never launched allocated
    // nothing: the buffers it kept must not be freed.
    if (!launched_) {
      try {
        backend_.forget_allocations(kept_);
      } catch (...) {  // no memory to note them: their frees will report an error instead
      }
    }
    cudaError_t err = cudaStreamSynchronize(backend_.stream());
    if (err == cudaSuccess) err = cudaGraphExecDestroy(exec_);
    if (err == cudaSuccess) err = cudaGraphDestroy(graph_);
    if (err != cudaSuccess) {
      std::fprintf(stderr, "flaxpp: destroying a CUDA graph failed: %s\n", cudaGetErrorString(err));
      (void)cudaGetLastError();  // reported: not the next kernel's error (desk review 2 #10)
    }
    --backend_.live_graphs_;
  }

  void launch() override {
    FLAXPP_CUDA_CHECK(cudaSetDevice(backend_.device().index));
    // The graph's memory comes from the driver, not the backend's pool: the first launch
    // lets the pool hand back what it holds unused (the eager steps' temporaries).
    if (!launched_) backend_.trim_pool();
    const cudaError_t err = cudaGraphLaunch(exec_, backend_.stream());
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      // Whether a failed relaunch already freed the kept buffers is not documented: they are
      // forgotten rather than freed twice (at worst they leak once).
      if (launched_) backend_.forget_allocations(kept_);
      launched_ = false;
      throw OutOfMemoryError(
          detail::str("launching a recorded CUDA graph on ", backend_.device(),
                      ": its memory (the recorded step's temporaries) does not fit beside the ",
                      backend_.memory_stats().live_bytes,
                      " live bytes; use a remat policy, a smaller batch, or FLAXPP_CUDA_GRAPHS=0"));
    }
    if (err != cudaSuccess) throw_cuda_error(err, "cudaGraphLaunch", __FILE__, __LINE__);
    launched_ = true;
  }

 private:
  CudaBackend& backend_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  std::unordered_set<std::uint64_t> kept_;  // graph allocations the recorded work kept (serials)
  bool launched_ = false;
};

void CudaBackend::forget_allocations(const std::unordered_set<std::uint64_t>& never_made) {
  std::lock_guard lock(mutex_);
  never_made_.insert(never_made.begin(), never_made.end());
}

std::unique_ptr<DeviceGraph> CudaBackend::capture_impl(const std::function<void()>& work,
                                                       std::string& why) {
  FLAXPP_ASSERT(!capturing_.load(), "CudaBackend::capture inside a capture");
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  // Thread-local mode: a call from this thread that could synchronise (cudaMalloc, a blocking
  // copy) fails and ends the recording instead of silently breaking it.
  if (const cudaError_t err = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
      err != cudaSuccess) {
    (void)cudaGetLastError();
    why = detail::str("cudaStreamBeginCapture failed: ", cudaGetErrorString(err));
    return nullptr;
  }
  {
    std::lock_guard lock(mutex_);
    capture_.emplace();
  }
  capturing_.store(true, std::memory_order_release);
  std::string problem;
  try {
    work();
  } catch (const std::exception& e) {
    problem = e.what();
  } catch (...) {
    problem = "the recorded work threw a non-standard exception";
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  (void)cudaGetLastError();  // capture errors are not sticky; clear the last one
  Capture done;
  {
    std::lock_guard lock(mutex_);
    done = std::move(*capture_);
    capture_.reset();
  }
  capturing_.store(false, std::memory_order_release);
  for (const Allocation& a : done.deferred_frees)
    deallocate_impl(a);
  if (problem.empty() && done.failed)
    problem = done.problem.empty() ? "the recording failed" : done.problem;
  if (problem.empty() && ended != cudaSuccess)
    problem = detail::str("cudaStreamEndCapture failed: ", cudaGetErrorString(ended));
  cudaGraphExec_t exec = nullptr;
  if (problem.empty()) {
    // The kept buffers (the recording's outputs) stay allocated between launches; each launch
    // frees and remakes them at the same addresses.
    if (const cudaError_t err =
            cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
        err != cudaSuccess) {
      (void)cudaGetLastError();
      problem = detail::str("cudaGraphInstantiate failed: ", cudaGetErrorString(err));
    }
  }
  if (!problem.empty()) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    forget_allocations(done.made);
    why = problem;
    return nullptr;
  }
  return std::make_unique<CudaGraph>(*this, graph, exec, std::move(done.made));
}

}  // namespace flaxpp::cuda
