// CUDA graphs: CudaBackend::capture_impl records the work queued on the backend's stream (stream
// capture, with stream-ordered allocations becoming graph memory nodes) and CudaGraph replays
// it. A recording that fails (a synchronisation, a pageable copy, an error) leaves nothing
// behind: its kept buffers are forgotten, and the caller runs its work eagerly instead. A graph
// dropped while a recording captures the stream is destroyed when that recording ends.
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
    // Destructors never throw. A recording never launched allocated nothing: the buffers it
    // kept must not be freed.
    if (!launched_) {
      try {
        backend_.forget_allocations(kept_);
      } catch (...) {  // no memory to note them: their frees will report an error instead
      }
    }
    backend_.retire_graph({graph_, exec_});
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

void CudaBackend::retire_graph(RetiredGraph g) noexcept {
  std::lock_guard lock(mutex_);
  if (capture_) {
    // Waiting for the stream would be illegal in the capture and end it (desk review 2 #11):
    // the graph goes when the recording ends, still counted in live_graphs().
    try {
      retired_graphs_.push_back(g);
    } catch (...) {  // no memory to note it: it leaks, its cuDNN plans stay loaded
      std::fprintf(stderr, "flaxpp: a CUDA graph dropped during a recording leaks\n");
    }
    return;
  }
  destroy_graph_locked(g);
}

void CudaBackend::destroy_retired_graphs() noexcept {
  std::lock_guard lock(mutex_);
  if (capture_) return;
  for (const RetiredGraph& g : retired_graphs_)
    destroy_graph_locked(g);
  retired_graphs_.clear();
}

void CudaBackend::destroy_graph_locked(RetiredGraph g) noexcept {
  // No capture can begin on stream_ during this: capture_impl notes a capture under mutex_
  // before beginning it. The graph's launches may still run: they are waited for, so that what
  // they use (cuDNN's plans, kept while live_graphs() counts them) outlives them.
  cudaError_t err = cudaStreamSynchronize(stream());
  const char* call = "cudaStreamSynchronize";
  if (err == cudaSuccess) {
    err = cudaGraphExecDestroy(g.exec);
    call = "cudaGraphExecDestroy";
  }
  if (err == cudaSuccess) {
    err = cudaGraphDestroy(g.graph);
    call = "cudaGraphDestroy";
  }
  // The graph's memory stays cached for graphs, out of the pool's reach, until trimmed: every
  // dropped recording (moved arguments, a new signature) would strand its temporaries
  // (desk review 2 #5).
  if (err == cudaSuccess) {
    err = cudaDeviceGraphMemTrim(index_);
    call = "cudaDeviceGraphMemTrim";
  }
  if (err != cudaSuccess) {
    std::fprintf(stderr, "flaxpp: destroying a CUDA graph failed in %s: %s\n", call,
                 cudaGetErrorString(err));
    (void)cudaGetLastError();  // reported: not the next kernel's error (desk review 2 #10)
  }
  --live_graphs_;
}

CudaBackend::Capture CudaBackend::end_capture_record() {
  Capture done;
  {
    std::lock_guard lock(mutex_);
    done = std::move(*capture_);
    capture_.reset();
  }
  capturing_.store(false, std::memory_order_release);
  for (const Allocation& a : done.deferred_frees)  // released during the capture: free them now
    deallocate_impl(a);
  destroy_retired_graphs();  // graphs the recorded work (or another thread) dropped meanwhile
  return done;
}

std::unique_ptr<DeviceGraph> CudaBackend::capture_impl(const std::function<void()>& work,
                                                       std::string& why) {
  FLAXPP_ASSERT(!capturing_.load(), "CudaBackend::capture inside a capture");
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  // Noted before it begins, so that a graph dropped on another thread from now on waits for the
  // end of the capture instead of synchronising the stream inside it (retire_graph).
  {
    std::lock_guard lock(mutex_);
    if (capture_.has_value()) {  // another thread's recording, on the same stream
      why = "another thread is recording a CUDA graph on this device's stream";
      return nullptr;
    }
    capture_.emplace();
  }
  // Thread-local mode: a call from this thread that could synchronise (cudaMalloc, a blocking
  // copy) fails and ends the recording instead of silently breaking it.
  if (const cudaError_t err = cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal);
      err != cudaSuccess) {
    (void)cudaGetLastError();
    (void)end_capture_record();
    why = detail::str("cudaStreamBeginCapture failed: ", cudaGetErrorString(err));
    return nullptr;
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
  const cudaError_t ended = cudaStreamEndCapture(stream(), &graph);
  (void)cudaGetLastError();  // capture errors are not sticky; clear the last one
  const Capture done = end_capture_record();
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
