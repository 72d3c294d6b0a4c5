// Private to jit: a compiled step's CUDA-graph recording. The first call of a signature on a
// GPU runs eagerly (its allocations warm the pool); the next is recorded as one CUDA graph and
// launched, and later calls launch it again.
//
// What the recording reads and writes stays at fixed addresses:
// - a donated argument whose buffer the step updates in place (memory_analysis's aliases: the
//   parameters and the optimiser state) must come back at the address its result had, as the
//   caller's next step passes the previous results; the recording keeps only the address, and
//   the caller owns the buffer;
// - every other argument is copied into a buffer of the recording before each launch (the
//   batch, a host scalar);
// - the other results (the loss) are the recording's, rewritten by every launch: the caller
//   gets copies.
// An argument at another address runs the step eagerly, and the next call records again (a
// few times at most). A step that cannot be recorded (a host synchronisation, pinned memory,
// an error) runs eagerly from then on, with one line on stderr saying why.
//
// A step whose graph holds collectives, in a job of several processes, goes the same way on
// every process at every call: NCCL needs a collective captured on every rank or on none, and a
// process that runs eagerly while another launches its recording hangs both. Each call is then
// decided by a vote of the processes (agree_on_call) through the agreement the dist layer
// installs (set_recording_agreement), which transforms cannot call itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/ir/graph.hpp"
#include "flaxpp/transforms/memory_analysis.hpp"
#include "flaxpp/transforms/recording_agreement.hpp"

namespace flaxpp::transforms {

// One call's way, the same on every process: the least over the processes of `local`; where
// that is ready, the least of what `prepare` gives on each (it records the step where this
// process needs a recording, and says whether it has one to launch). A process votes as often
// as the others whatever its own state, so the collectives behind `agree` stay matched.
RecordingVote agree_on_call(RecordingVote local, const std::function<RecordingVote()>& prepare,
                            const RecordingAgreement& agree);

class StepRecording {
 public:
  // `graph` and `memory` (plan_memory's) must outlive the recording.
  StepRecording(const ir::Graph& graph, const MemoryAnalysis& memory, std::vector<bool> donated,
                std::size_t num_outputs, Device device);

  // The step's results for the graph inputs `leaves` (the caller's arrays; donated ones are
  // taken from the caller as jit's eager path takes them), from the recording; nullopt where
  // this call must run eagerly, with `leaves` untouched.
  std::optional<std::vector<Array>> run(const std::vector<Array>& leaves);
  // Drops the recording and what it holds; with `again`, a later call may record anew.
  void forget(bool again);
  std::int64_t replays() const;

 private:
  // A recording made by this call, not launched yet.
  struct Attempt {
    std::unique_ptr<DeviceGraph> graph;  // null: the recording failed (eagerly from now on)
    std::vector<Array> outs;             // the recorded step's results
    std::vector<Array> backup;           // per aliased input: its value, for an eager run
    bool taken = false;                  // the donated arguments are the attempt's
  };

  // Forgets the recording and its buffers (the caller holds mutex_).
  void drop();
  // Whether an aliased argument is not where the recording writes it.
  bool moved(const std::vector<Array>& leaves) const;
  // This process's vote before anything is done for the call.
  RecordingVote local_vote(const std::vector<Array>& leaves) const;
  // Records the step on `leaves` into `attempt` (the donated ones taken where the backups
  // could be made); ready where it has a recording to launch, else never (said on stderr).
  RecordingVote record(const std::vector<Array>& leaves, Attempt& attempt);
  // Makes `attempt`'s recording the step's and launches it; where its memory does not fit,
  // runs the step eagerly instead (none of it in a job that agrees: OutOfMemoryError).
  std::vector<Array> first_launch(const std::vector<Array>& leaves, Attempt& attempt, bool agreed);
  // The step run eagerly on what `attempt` took: its backups and the staged copies.
  std::vector<Array> eager_on(const std::vector<Array>& leaves, Attempt& attempt);
  std::vector<Array> launch(const std::vector<Array>& leaves);
  // Copies `leaf` into the recording's buffer for input i.
  void stage(std::size_t i, const Array& leaf);

  const ir::Graph& graph_;
  const BufferAssignment& buffers_;  // the step's plan: the recording runs it as the CPU does
  std::vector<bool> donated_;
  std::vector<std::ptrdiff_t> alias_of_input_;   // input -> output written into it, or -1
  std::vector<std::ptrdiff_t> alias_of_output_;  // output -> input it is written into, or -1
  std::size_t num_outputs_;
  Device device_;
  bool collectives_;  // the graph exchanges data between processes: calls are agreed on

  mutable std::mutex mutex_;
  bool warmed_ = false;  // the first call ran eagerly
  bool recordable_ = true;
  bool off_ = false;  // the vote said never: eagerly from now on, without voting
  int recordings_ = 0;
  std::int64_t replays_ = 0;
  std::vector<const void*> addresses_;           // per aliased input: where its buffer must be
  std::vector<std::shared_ptr<Buffer>> staged_;  // per other input: the buffer it is copied to
  std::vector<Array> kept_;  // per result that is not aliased: the recording's buffer
  std::unique_ptr<DeviceGraph> device_graph_;  // destroyed before the buffers it kept
};

}  // namespace flaxpp::transforms
