// The state of the CUDA backend's graph recordings (cuda_graph.cpp): the record of the one
// recording in progress (the graph allocations it made, the frees it must defer, the first
// problem), the serials of buffers a recording kept but never launched (their frees are
// skipped), and the recorded graphs dropped while a recording captures the stream (destroyed
// when it ends). Its one lock also orders against a recording beginning on another thread what
// must not happen inside one: waiting for the stream before retrying an allocation, and
// destroying a graph.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "flaxpp/core/backend.hpp"

namespace flaxpp::cuda {

class RecordingState {
 public:
  // What a recording did: the graph allocations made so far (by serial), pre-existing buffers
  // released (their frees wait for the end of the recording, which then fails), and the first
  // problem seen.
  struct Record {
    std::unordered_set<std::uint64_t> made;
    std::vector<Allocation> deferred_frees;
    std::string problem;
    bool failed = false;
    // Notes that the recording fails, and the first reason why (noexcept: frees call it).
    void fail(const char* why) noexcept;
  };
  // How a free goes, given the recordings.
  enum class Free {
    skip,      // a buffer a recording kept but never launched: never allocated
    recorded,  // a graph allocation freed inside its recording: queued as a free node
    deferred,  // released inside a recording that did not make it: freed when it ends
    now,       // no recording involved: free it
  };

  // The graphs are destroyed on `device` after waiting for `stream`, the recorded one.
  RecordingState(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  ~RecordingState();  // destroys the graphs retired during a recording
  RecordingState(const RecordingState&) = delete;
  RecordingState& operator=(const RecordingState&) = delete;

  // Whether work queued now is being recorded (readable without the lock).
  bool capturing() const { return capturing_.load(std::memory_order_acquire); }
  // Notes that a recording begins (before cudaStreamBeginCapture, so that a graph dropped on
  // another thread from now on waits for its end). False, noting nothing, while another thread
  // records.
  bool begin();
  // The stream capture has begun: allocations from now on are graph allocations.
  void started() { capturing_.store(true, std::memory_order_release); }
  // Ends the record of a recording (begun or not) and returns it. The graphs retired meanwhile
  // are destroyed; the deferred frees are the caller's to make.
  Record end();
  // Notes that the recording in progress (if any) fails, and why.
  void fail(const char* why) noexcept;
  // Notes a device allocation made inside the recording in progress.
  void made(std::uint64_t serial);
  // Decides a free. A graph allocation freed inside its recording is queued (cudaFreeAsync on
  // the stream) under the lock; a deferred one is kept in the record, which fails.
  Free route_free(const Allocation& a) noexcept;
  // Runs `f` under the lock unless a recording is noted, and says whether it ran: work that
  // waits for the stream (a retry after out of memory) cannot run inside a recording.
  template <class F>
  bool unless_recording(F&& f) {
    std::lock_guard lock(mutex_);
    if (record_.has_value()) return false;
    f();
    return true;
  }
  // Buffers (by serial) that a recording kept but never launched: their frees are skipped.
  void forget(const std::unordered_set<std::uint64_t>& never_made);

  // Recorded graphs alive: what they run must stay loaded (cuDNN's plans).
  int live_graphs() const { return live_graphs_.load(); }
  void graph_made() { ++live_graphs_; }
  // A recorded graph no longer wanted: destroyed now or, while a recording captures the stream
  // (where waiting for it is illegal), when that recording ends.
  void retire(cudaGraph_t graph, cudaGraphExec_t exec) noexcept;

 private:
  struct Retired {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
  };
  void destroy_retired() noexcept;          // unless recording
  void destroy_locked(Retired g) noexcept;  // mutex_ held, not recording

  int device_;
  cudaStream_t stream_;
  mutable std::mutex mutex_;  // guards never_made_, record_ and retired_ (frees: any thread)
  std::unordered_set<std::uint64_t> never_made_;
  std::optional<Record> record_;
  std::atomic<bool> capturing_{false};  // record_.has_value() once the capture began
  std::vector<Retired> retired_;
  std::atomic<int> live_graphs_{0};
};

}  // namespace flaxpp::cuda
