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
    backend_.recording_.graph_made();
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
    backend_.recording_.retire(graph_, exec_);
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

RecordingState::Record CudaBackend::end_recording() {
  RecordingState::Record done = recording_.end();
  for (const Allocation& a : done.deferred_frees)  // released during the recording: free them now
    deallocate_impl(a);
  return done;
}

std::unique_ptr<DeviceGraph> CudaBackend::capture_impl(const std::function<void()>& work,
                                                       std::string& why) {
  FLAXPP_ASSERT(!recording_.capturing(), "CudaBackend::capture inside a capture");
  FLAXPP_CUDA_CHECK(cudaSetDevice(index_));
  // Noted before it begins, so that a graph dropped on another thread from now on waits for the
  // end of the capture instead of synchronising the stream inside it (retire_graph).
  if (!recording_.begin()) {
    why = "another thread is recording a CUDA graph on this device's stream";
    return nullptr;
  }
  // Thread-local mode: a call from this thread that could synchronise (cudaMalloc, a blocking
  // copy) fails and ends the recording instead of silently breaking it.
  if (const cudaError_t err = cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal);
      err != cudaSuccess) {
    (void)cudaGetLastError();
    (void)end_recording();
    why = detail::str("cudaStreamBeginCapture failed: ", cudaGetErrorString(err));
    return nullptr;
  }
  recording_.started();
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
  const RecordingState::Record done = end_recording();
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
