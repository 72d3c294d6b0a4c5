// A compiled step's CUDA-graph recording (step_recording.hpp).
#include "transforms/step_recording.hpp"

#include <cstdio>
#include <set>

#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
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

// The first equation of `graph` (or of a sub-graph it holds) with `effect`, or nullptr.
const ir::Eqn* find_effect(const ir::Graph& graph, bool ir::Effects::*effect) {
  for (const ir::Eqn& e : graph.eqns) {
    if (ir::effects_of(*e.prim).*effect) return &e;
    const ir::Eqn* inside = nullptr;
    ir::for_each_subgraph(e, [&](const auto& /*name*/, const ir::Graph& sub) {
      if (inside == nullptr) inside = find_effect(sub, effect);
    });
    if (inside != nullptr) return inside;
  }
  return nullptr;
}

// set_recording_agreement's, read at every call of a step with collectives.
struct Installed {
  std::mutex mutex;
  RecordingAgreement agree;
};
Installed& installed() {
  static Installed* i = new Installed;  // never destroyed: steps may run during exit
  return *i;
}

RecordingAgreement installed_agreement() {
  Installed& i = installed();
  std::lock_guard lock(i.mutex);
  return i.agree;
}

}  // namespace

void set_recording_agreement(RecordingAgreement agree) {
  Installed& i = installed();
  std::lock_guard lock(i.mutex);
  i.agree = std::move(agree);
}

RecordingVote agree_on_call(RecordingVote local, const std::function<RecordingVote()>& prepare,
                            const RecordingAgreement& agree) {
  const RecordingVote way = agree(local);
  if (way != RecordingVote::ready) return way;
  RecordingVote prepared = RecordingVote::never;
  try {
    prepared = prepare();
  } catch (...) {
    // The others wait for this process's second vote: it is cast (never) before the error
    // goes on, so that no process is left in the collective.
    (void)agree(RecordingVote::never);
    throw;
  }
  return agree(prepared);
}

StepRecording::StepRecording(const ir::Graph& graph, const MemoryAnalysis& memory,
                             std::vector<bool> donated, std::size_t num_outputs, Device device)
    : graph_(graph),
      buffers_(memory.buffers),
      donated_(std::move(donated)),
      alias_of_input_(donated_.size(), -1),
      alias_of_output_(num_outputs, -1),
      num_outputs_(num_outputs),
      device_(device),
      collectives_(find_effect(graph, &ir::Effects::collective) != nullptr) {
  if (const ir::Eqn* e = find_effect(graph, &ir::Effects::host_sync)) {
    recordable_ = false;
    if (device_.kind != DeviceKind::cpu)
      say_eager(device_, detail::str("its ", e->prim->name(),
                                     " reads a value on the host to decide what runs next, which "
                                     "a recording cannot replay"));
  }
  for (const auto& [input, output] : memory.aliases) {
    alias_of_input_[input] = static_cast<std::ptrdiff_t>(output);
    alias_of_output_[output] = static_cast<std::ptrdiff_t>(input);
  }
}

std::int64_t StepRecording::replays() const {
  std::lock_guard lock(mutex_);
  return replays_;
}

void StepRecording::drop() {
  device_graph_.reset();
  kept_.clear();
  staged_.clear();
  addresses_.clear();
}

void StepRecording::forget(bool again) {
  std::lock_guard lock(mutex_);
  drop();
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

bool StepRecording::moved(const std::vector<Array>& leaves) const {
  if (device_graph_ == nullptr) return false;
  for (std::size_t i = 0; i < leaves.size(); ++i)
    if (alias_of_input_[i] >= 0 && address(leaves[i]) != addresses_[i]) return true;
  return false;
}

RecordingVote StepRecording::local_vote(const std::vector<Array>& leaves) const {
  // Inputs the recording writes in place must be this device's, each buffer given once.
  std::set<const void*> seen;
  for (std::size_t i = 0; i < leaves.size(); ++i)
    if (alias_of_input_[i] >= 0 &&
        (leaves[i].device() != device_ || !seen.insert(address(leaves[i])).second))
      return RecordingVote::not_now;
  if (device_graph_ != nullptr)
    return moved(leaves) ? RecordingVote::not_now : RecordingVote::ready;
  return recordable_ ? RecordingVote::ready : RecordingVote::never;
}

std::optional<std::vector<Array>> StepRecording::run(const std::vector<Array>& leaves) {
  std::lock_guard lock(mutex_);
  if (!warmed_) {
    warmed_ = true;
    return std::nullopt;
  }
  if (off_) return std::nullopt;
  // Alone, this process's votes decide; with collectives in a job of several, the job's.
  RecordingAgreement agree = collectives_ ? installed_agreement() : RecordingAgreement();
  const bool agreed = static_cast<bool>(agree);
  if (!agreed) agree = [](RecordingVote v) { return v; };
  RecordingVote mine = local_vote(leaves);
  Attempt attempt;
  RecordingVote way = RecordingVote::never;
  try {
    way = agree_on_call(
        mine,
        [&] {
          mine = device_graph_ != nullptr ? RecordingVote::ready : record(leaves, attempt);
          return mine;
        },
        agree);
  } catch (...) {
    // The job voted never with this process (agree_on_call): off here too, as there.
    drop();
    recordable_ = false;
    off_ = true;
    throw;
  }
  if (way == RecordingVote::ready) {
    if (attempt.graph != nullptr) return first_launch(leaves, attempt, agreed);
    std::vector<Array> results = launch(leaves);
    ++replays_;
    return results;
  }
  std::optional<std::vector<Array>> results;
  if (attempt.taken) results = eager_on(leaves, attempt);  // the vote refused this recording
  if (way == RecordingVote::never) {
    if (mine != RecordingVote::never)
      say_eager(device_, "another process of the job cannot record or launch this step, and "
                         "every process must run its collectives alike");
    drop();
    recordable_ = false;
    off_ = true;
  } else if (moved(leaves)) {
    // The arguments moved (a copy kept elsewhere): eagerly now, recorded again next time.
    drop();
    recordable_ = recordable_ && recordings_ < kMaxRecordings;
  }
  return results;
}

RecordingVote StepRecording::record(const std::vector<Array>& leaves, Attempt& attempt) {
  ++recordings_;
  Backend& be = backend(device_);
  std::string why;
  // The graph's inputs: the aliased arguments taken from the caller (so that the step writes
  // them in place, as eagerly), the others copied into the recording's buffers. The aliased
  // ones are backed up first: a recording that fails, or that the job's vote refuses, has given
  // them to the capture, which ran nothing, and the step then runs eagerly from the copies.
  staged_.assign(leaves.size(), nullptr);
  addresses_.assign(leaves.size(), nullptr);
  attempt.backup.assign(leaves.size(), Array());
  std::vector<Array> inputs(leaves.size());
  try {
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      if (alias_of_input_[i] >= 0) {
        attempt.backup[i] = leaves[i].copy();
        continue;
      }
      staged_[i] = be.allocate(leaves[i].nbytes());
      stage(i, leaves[i]);
      inputs[i] = Array(staged_[i], leaves[i].shape(), leaves[i].dtype());
    }
  } catch (const std::exception& e) {  // e.g. no memory for the copies
    staged_.clear();
    addresses_.clear();
    attempt.backup.clear();
    recordable_ = false;
    say_eager(device_, e.what());
    return RecordingVote::never;
  }
  // From here on the call is the recording's: donated arguments are taken.
  attempt.taken = true;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (alias_of_input_[i] >= 0) {
      inputs[i] = take(leaves[i]);
      addresses_[i] = address(inputs[i]);
    } else if (donated_[i] && leaves[i].device() == device_) {
      (void)take(leaves[i]);  // given up by the caller, and copied: freed now
    }
  }
  // The taken inputs go in alone, so that the step may write into them; the recording keeps
  // its staged ones.
  std::vector<Array> graph_inputs = std::move(inputs);
  attempt.graph = be.capture(
      [&] { attempt.outs = eval_graph(graph_, std::move(graph_inputs), buffers_); }, why);
  for (std::size_t k = 0; attempt.graph != nullptr && k < num_outputs_; ++k)
    if (const std::ptrdiff_t i = alias_of_output_[k];
        i >= 0 && address(attempt.outs[k]) != addresses_[static_cast<std::size_t>(i)]) {
      attempt.graph.reset();
      why = "a result the memory plan writes into a donated argument got a buffer of its own";
    }
  if (attempt.graph == nullptr) {
    recordable_ = false;
    say_eager(device_, why);
    return RecordingVote::never;
  }
  return RecordingVote::ready;
}

std::vector<Array> StepRecording::first_launch(const std::vector<Array>& leaves,
                                               Attempt& attempt, bool agreed) {
  kept_.assign(num_outputs_, Array());
  for (std::size_t k = 0; k < num_outputs_; ++k)
    if (alias_of_output_[k] < 0) kept_[k] = attempt.outs[k];
  device_graph_ = std::move(attempt.graph);
  try {
    device_graph_->launch();
  } catch (const OutOfMemoryError& e) {
    // The graph's memory does not fit beside the pool's: eagerly from now on.
    device_graph_.reset();
    kept_.clear();
    recordable_ = false;
    off_ = true;
    if (agreed) {
      // The other processes launched their recordings, whose collectives an eager step here
      // would not match: this process cannot go on alone.
      drop();
      throw OutOfMemoryError(::flaxpp::detail::str(
          "the first launch of a jitted step's CUDA graph on ", device_,
          " ran out of memory, and the step's collectives must run alike on every process of "
          "the job, whose other processes launched theirs: ",
          e.what(), ". Run without CUDA graphs (FLAXPP_CUDA_GRAPHS=0), or free memory"));
    }
    say_eager(device_, e.what());
    return eager_on(leaves, attempt);
  }
  ++replays_;
  attempt.backup.clear();
  std::vector<Array> results(num_outputs_);
  for (std::size_t k = 0; k < num_outputs_; ++k)
    results[k] = alias_of_output_[k] >= 0 ? std::move(attempt.outs[k]) : kept_[k].copy();
  return results;
}

std::vector<Array> StepRecording::eager_on(const std::vector<Array>& leaves, Attempt& attempt) {
  // The recording and what it kept are forgotten (a recording never launched filled nothing).
  attempt.graph.reset();
  attempt.outs.clear();
  std::vector<Array> inputs(leaves.size());
  for (std::size_t i = 0; i < leaves.size(); ++i)
    inputs[i] = alias_of_input_[i] >= 0 ? std::move(attempt.backup[i])
                                        : Array(staged_[i], leaves[i].shape(), leaves[i].dtype());
  staged_.clear();
  addresses_.clear();
  return eval_graph(graph_, std::move(inputs), buffers_);
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
