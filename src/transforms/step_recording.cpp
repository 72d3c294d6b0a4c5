// A compiled step's CUDA-graph recording (step_recording.hpp).
#include "transforms/step_recording.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "flaxpp/transforms/trace.hpp"

namespace flaxpp::transforms {
namespace {

// Recordings of a step whose arguments keep moving would cost more than they save.
constexpr int kMaxRecordings = 3;

void say_eager(Device device, const std::string& why) {
  std::fprintf(stderr, "flaxpp: this jitted step runs eagerly on %s, without a CUDA graph: %s\n",
               device.str().c_str(), why.c_str());
}

const void* address(const Array& a) {
  return a.buffer().data();
}

// `leaf`'s allocation as a new Buffer the step owns; the caller's arrays of it are donated.
Array take(const Array& leaf) {
  return Array(leaf.buffer().backend().take(leaf.buffer()), leaf.shape(), leaf.dtype());
}

}  // namespace

StepRecording::StepRecording(const ir::Graph& graph, const MemoryAnalysis& memory,
                             std::vector<bool> donated, std::size_t num_outputs, Device device)
    : graph_(graph),
      donated_(std::move(donated)),
      alias_of_input_(donated_.size(), -1),
      alias_of_output_(num_outputs, -1),
      num_outputs_(num_outputs),
      device_(device) {
  for (const auto& [input, output] : memory.aliases) {
    alias_of_input_[input] = static_cast<std::ptrdiff_t>(output);
    alias_of_output_[output] = static_cast<std::ptrdiff_t>(input);
  }
}

std::int64_t StepRecording::replays() const {
  std::lock_guard lock(mutex_);
  return replays_;
}

void StepRecording::forget(bool again) {
  std::lock_guard lock(mutex_);
  device_graph_.reset();
  kept_.clear();
  staged_.clear();
  addresses_.clear();
  recordable_ = recordable_ && again && recordings_ < kMaxRecordings;
}

void StepRecording::stage(std::size_t i, const Array& leaf) {
  Buffer& dst = *staged_[i];
  if (&leaf.buffer() == &dst) return;
  if (leaf.device().kind == DeviceKind::cpu)
    dst.backend().copy_from_host(leaf.buffer().data(), dst, leaf.nbytes());
  else
    dst.backend().copy(leaf.buffer(), dst, leaf.nbytes());
}

std::optional<std::vector<Array>> StepRecording::run(const std::vector<Array>& leaves) {
  std::unique_lock lock(mutex_);
  if (!warmed_) {
    warmed_ = true;
    return std::nullopt;
  }
  // Inputs the recording writes in place must be this device's, each buffer given once.
  std::set<const void*> seen;
  for (std::size_t i = 0; i < leaves.size(); ++i)
    if (alias_of_input_[i] >= 0 &&
        (leaves[i].device() != device_ || !seen.insert(address(leaves[i])).second))
      return std::nullopt;
  if (device_graph_ != nullptr) {
    for (std::size_t i = 0; i < leaves.size(); ++i)
      if (alias_of_input_[i] >= 0 && address(leaves[i]) != addresses_[i]) {
        // The arguments moved (a copy kept elsewhere): eagerly now, recorded again next time.
        lock.unlock();
        forget(true);
        return std::nullopt;
      }
    std::vector<Array> results = launch(leaves);
    ++replays_;
    return results;
  }
  if (!recordable_) return std::nullopt;
  std::vector<Array> results;
  if (!record(leaves, results)) return std::nullopt;
  if (device_graph_ != nullptr) ++replays_;  // else it ran eagerly, the recording refused
  return results;
}

bool StepRecording::record(const std::vector<Array>& leaves, std::vector<Array>& results) {
  ++recordings_;
  Backend& be = backend(device_);
  std::string why;
  // The graph's inputs: the aliased arguments taken from the caller (so that the step writes
  // them in place, as eagerly), the others copied into the recording's buffers. The aliased
  // ones are backed up first: a recording that fails has given them to the capture, which
  // ran nothing, and the step then runs eagerly from the copies.
  staged_.assign(leaves.size(), nullptr);
  addresses_.assign(leaves.size(), nullptr);
  std::vector<Array> inputs(leaves.size()), backup(leaves.size());
  try {
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      if (alias_of_input_[i] >= 0) {
        backup[i] = leaves[i].copy();
        continue;
      }
      staged_[i] = be.allocate(leaves[i].nbytes());
      stage(i, leaves[i]);
      inputs[i] = Array(staged_[i], leaves[i].shape(), leaves[i].dtype());
    }
  } catch (const std::exception& e) {  // e.g. no memory for the copies
    staged_.clear();
    addresses_.clear();
    recordable_ = false;
    say_eager(device_, e.what());
    return false;
  }
  // From here on the call is the recording's: donated arguments are taken.
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (alias_of_input_[i] >= 0) {
      inputs[i] = take(leaves[i]);
      addresses_[i] = address(inputs[i]);
    } else if (donated_[i] && leaves[i].device() == device_) {
      (void)take(leaves[i]);  // given up by the caller, and copied: freed now
    }
  }
  std::vector<Array> outs;
  // The taken inputs go in alone, so that the step may write into them; the recording keeps
  // its staged ones.
  std::vector<Array> graph_inputs = std::move(inputs);
  std::unique_ptr<DeviceGraph> recorded =
      be.capture([&] { outs = eval_graph(graph_, std::move(graph_inputs)); }, why);
  bool ok = recorded != nullptr;
  for (std::size_t k = 0; ok && k < num_outputs_; ++k)
    if (const std::ptrdiff_t i = alias_of_output_[k];
        i >= 0 && address(outs[k]) != addresses_[static_cast<std::size_t>(i)]) {
      ok = false;
      why = "a result the memory plan writes into a donated argument got a buffer of its own";
    }
  if (ok) {
    kept_.assign(num_outputs_, Array());
    for (std::size_t k = 0; k < num_outputs_; ++k)
      if (alias_of_output_[k] < 0) kept_[k] = outs[k];
    device_graph_ = std::move(recorded);
    try {
      device_graph_->launch();
    } catch (const OutOfMemoryError& e) {
      // The graph's memory does not fit beside the pool's: eagerly from now on.
      why = e.what();
      ok = false;
      device_graph_.reset();
      kept_.clear();
    }
  }
  if (!ok) {
    // The recording and what it kept are forgotten (a recording never launched filled
    // nothing); the step runs eagerly on the backups and the staged copies.
    recorded.reset();
    outs.clear();
    say_eager(device_, why);
    std::vector<Array> eager_inputs(leaves.size());
    for (std::size_t i = 0; i < leaves.size(); ++i)
      eager_inputs[i] = alias_of_input_[i] >= 0
                            ? std::move(backup[i])
                            : Array(staged_[i], leaves[i].shape(), leaves[i].dtype());
    staged_.clear();
    addresses_.clear();
    recordable_ = false;
    results = eval_graph(graph_, std::move(eager_inputs));
    return true;
  }
  backup.clear();
  results.assign(num_outputs_, Array());
  for (std::size_t k = 0; k < num_outputs_; ++k)
    results[k] = alias_of_output_[k] >= 0 ? std::move(outs[k]) : kept_[k].copy();
  return true;
}

std::vector<Array> StepRecording::launch(const std::vector<Array>& leaves) {
  std::vector<Array> taken(leaves.size());
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (alias_of_input_[i] >= 0) {
      taken[i] = take(leaves[i]);
    } else {
      stage(i, leaves[i]);
      if (donated_[i] && leaves[i].device() == device_) (void)take(leaves[i]);
    }
  }
  device_graph_->launch();
  std::vector<Array> results(num_outputs_);
  for (std::size_t k = 0; k < num_outputs_; ++k) {
    const std::ptrdiff_t i = alias_of_output_[k];
    results[k] = i >= 0 ? taken[static_cast<std::size_t>(i)] : kept_[k].copy();
  }
  return results;
}

}  // namespace flaxpp::transforms
