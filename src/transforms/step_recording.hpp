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
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/ir/graph.hpp"
#include "flaxpp/transforms/memory_analysis.hpp"

namespace flaxpp::transforms {

class StepRecording {
 public:
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
  // Records and launches the step; where the recording fails after the donated arguments were
  // taken, runs it eagerly instead. False (results untouched, leaves too) where nothing was
  // done: the caller runs the step eagerly.
  bool record(const std::vector<Array>& leaves, std::vector<Array>& results);
  std::vector<Array> launch(const std::vector<Array>& leaves);
  // Copies `leaf` into the recording's buffer for input i.
  void stage(std::size_t i, const Array& leaf);

  const ir::Graph& graph_;
  std::vector<bool> donated_;
  std::vector<std::ptrdiff_t> alias_of_input_;   // input -> output written into it, or -1
  std::vector<std::ptrdiff_t> alias_of_output_;  // output -> input it is written into, or -1
  std::size_t num_outputs_;
  Device device_;

  mutable std::mutex mutex_;
  bool warmed_ = false;  // the first call ran eagerly
  bool recordable_ = true;
  int recordings_ = 0;
  std::int64_t replays_ = 0;
  std::vector<const void*> addresses_;  // per aliased input: where its buffer must be
  std::vector<std::shared_ptr<Buffer>> staged_;  // per other input: the buffer it is copied to
  std::vector<Array> kept_;  // per result that is not aliased: the recording's buffer
  std::unique_ptr<DeviceGraph> device_graph_;  // destroyed before the buffers it kept
};

}  // namespace flaxpp::transforms
