// How a recorded step decides, with collectives in a job of several processes, whether a call
// records, launches or runs eagerly: the same way on every process (agree_on_call), through an
// agreement that these tests fake with threads standing for the processes. Runs on the CPU,
// without MPI or a GPU (the CPU backend records nothing, so a recording always fails there).
#include <doctest/doctest.h>

#include <algorithm>
#include <barrier>
#include <cstddef>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "flaxpp/core/device.hpp"
#include "flaxpp/dist/all_reduce.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/memory_analysis.hpp"
#include "flaxpp/transforms/trace.hpp"
#include "src/transforms/step_recording.hpp"

using namespace flaxpp;
using transforms::RecordingVote;

namespace {

// A job of `n` processes, each a thread: agree(rank, vote) returns the least vote of the
// round, once every process has voted in it (a real job's host all_reduce), and counts the
// votes of each process.
class FakeJob {
 public:
  explicit FakeJob(std::size_t n) : round_(static_cast<std::ptrdiff_t>(n)), votes_(n), counts_(n) {}

  RecordingVote agree(std::size_t rank, RecordingVote vote) {
    votes_[rank] = vote;
    ++counts_[rank];
    round_.arrive_and_wait();
    RecordingVote least = RecordingVote::ready;
    for (const RecordingVote v : votes_)
      least = std::min(least, v);
    round_.arrive_and_wait();  // every process read the round before the next one is written
    return least;
  }
  const std::vector<int>& counts() const { return counts_; }

 private:
  std::barrier<> round_;
  std::vector<RecordingVote> votes_;
  std::vector<int> counts_;
};

constexpr RecordingVote kReady = RecordingVote::ready, kNotNow = RecordingVote::not_now,
                        kNever = RecordingVote::never;

struct Process {
  RecordingVote local;     // its vote before anything is done
  RecordingVote prepared;  // what its recording (or its recording already made) gives
  bool throws = false;     // its recording throws instead (an error inside the capture)
};

struct Outcome {
  RecordingVote way;
  bool prepared;      // prepare ran on this process
  bool threw = false;  // agree_on_call passed the recording's error on
};

// One call of a step on every process of `job`, each voting as `processes` says.
std::vector<Outcome> call(const std::vector<Process>& processes, FakeJob& job) {
  std::vector<Outcome> out(processes.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < processes.size(); ++r)
    threads.emplace_back([&, r] {
      bool prepared = false;
      try {
        const RecordingVote way = transforms::agree_on_call(
            processes[r].local,
            [&] {
              prepared = true;
              if (processes[r].throws) throw std::runtime_error("the capture failed");
              return processes[r].prepared;
            },
            [&](RecordingVote v) { return job.agree(r, v); });
        out[r] = {way, prepared};
      } catch (const std::runtime_error&) {
        out[r] = {kNever, prepared, true};
      }
    });
  for (std::thread& t : threads)
    t.join();
  return out;
}

// Every process went `way`, having prepared (recorded, or checked its recording) or not.
void check_all(const std::vector<Outcome>& outcomes, RecordingVote way, bool prepared) {
  for (const Outcome& o : outcomes) {
    CHECK(o.way == way);
    CHECK(o.prepared == prepared);
  }
}

}  // namespace

TEST_CASE("agree_on_call: processes that can all record or launch do so, after two votes each") {
  FakeJob job(3);
  check_all(call({{kReady, kReady}, {kReady, kReady}, {kReady, kReady}}, job), kReady, true);
  CHECK(job.counts() == std::vector<int>{2, 2, 2});
}

TEST_CASE("agree_on_call: one process whose argument moved makes every process run eagerly, "
          "and none records") {
  FakeJob job(2);
  check_all(call({{kReady, kReady}, {kNotNow, kReady}}, job), kNotNow, false);
  CHECK(job.counts() == std::vector<int>{1, 1});
}

TEST_CASE("agree_on_call: a recording that fails on one process turns the recordings off on "
          "every process, whose own captures succeeded") {
  FakeJob job(3);
  check_all(call({{kReady, kReady}, {kReady, kNever}, {kReady, kReady}}, job), kNever, true);
  CHECK(job.counts() == std::vector<int>{2, 2, 2});
}

TEST_CASE("agree_on_call: a recording that throws on one process still casts its vote (never), "
          "so the others are not left waiting, and its error goes on") {
  FakeJob job(3);
  const std::vector<Outcome> out =
      call({{kReady, kReady}, {kReady, kReady, true}, {kReady, kReady}}, job);
  for (const Outcome& o : out)
    CHECK(o.way == kNever);
  CHECK(out[1].threw);
  CHECK_FALSE(out[0].threw);
  CHECK(job.counts() == std::vector<int>{2, 2, 2});
}

TEST_CASE("agree_on_call: a process that will never record again outvotes the others") {
  FakeJob job(2);
  check_all(call({{kNever, kReady}, {kNotNow, kReady}}, job), kNever, false);
}

TEST_CASE("agree_on_call: alone, a process's own votes decide") {
  const auto alone = [](RecordingVote v) { return v; };
  int prepared = 0;
  const auto prepare = [&] {
    ++prepared;
    return kNever;
  };
  CHECK(transforms::agree_on_call(kNotNow, prepare, alone) == kNotNow);
  CHECK(prepared == 0);
  CHECK(transforms::agree_on_call(kReady, prepare, alone) == kNever);
  CHECK(prepared == 1);
}

namespace {

// x * 2, reduced over the job when `collective` (a job of one here: the identity).
ir::Graph doubling(bool collective) {
  const std::vector<AVal> avals{AVal{Shape{3}, DType::f32}};
  return make_graph(
      [collective](std::span<const Array> in) {
        const Array twice = in[0] * 2.0;
        return std::vector<Array>{collective ? dist::all_reduce(twice, dist::ReduceOp::sum)
                                             : twice};
      },
      avals);
}

// The installed agreement for one test: it answers `answer(vote)` and keeps the votes.
// On the CPU, whatever the default device (ctest's CUDA rerun makes it the GPU): the graph's
// literal and everything the recording makes are host arrays.
struct InstalledFake {
  DefaultDeviceScope on_cpu{Device::cpu()};
  std::vector<RecordingVote> votes;
  std::function<RecordingVote(RecordingVote)> answer = [](RecordingVote v) { return v; };
  InstalledFake() {
    transforms::set_recording_agreement([this](RecordingVote v) {
      votes.push_back(v);
      return answer(v);
    });
  }
  ~InstalledFake() { transforms::set_recording_agreement({}); }
};

}  // namespace

TEST_CASE("StepRecording: a step with collectives runs each call as the job's vote says, and "
          "stops voting once the job said never") {
  InstalledFake fake;
  const ir::Graph graph = doubling(true);
  const MemoryAnalysis memory = analyze_memory(graph, {false});
  transforms::StepRecording recording(graph, memory, {false}, 1, Device::cpu());
  const std::vector<Array> x{Array::from_vector(std::vector<float>{1, 2, 3}, Shape{3})};

  CHECK_FALSE(recording.run(x).has_value());  // the first call warms up eagerly, unvoted
  CHECK(fake.votes.empty());

  fake.answer = [](RecordingVote) { return kNotNow; };  // another process's argument moved
  CHECK_FALSE(recording.run(x).has_value());  // eagerly, by the caller, nothing recorded
  CHECK(fake.votes == std::vector<RecordingVote>{kReady});

  // This process's recording fails (the CPU records nothing): every process runs the call
  // eagerly, this one on what the recording was given.
  fake.answer = [](RecordingVote v) { return v; };
  const std::optional<std::vector<Array>> eager = recording.run(x);
  REQUIRE(eager.has_value());
  CHECK(eager->at(0).to_vector<float>() == std::vector<float>{2, 4, 6});
  CHECK(fake.votes == std::vector<RecordingVote>{kReady, kReady, kNever});

  CHECK_FALSE(recording.run(x).has_value());  // off on every process: no more votes
  CHECK(fake.votes.size() == 3);
  CHECK(recording.replays() == 0);
}

TEST_CASE("StepRecording: a step without collectives decides alone") {
  InstalledFake fake;
  const ir::Graph graph = doubling(false);
  const MemoryAnalysis memory = analyze_memory(graph, {false});
  transforms::StepRecording recording(graph, memory, {false}, 1, Device::cpu());
  const std::vector<Array> x{Array::from_vector(std::vector<float>{1, 2, 3}, Shape{3})};
  CHECK_FALSE(recording.run(x).has_value());
  const std::optional<std::vector<Array>> eager = recording.run(x);  // the recording fails
  REQUIRE(eager.has_value());
  CHECK(eager->at(0).to_vector<float>() == std::vector<float>{2, 4, 6});
  CHECK_FALSE(recording.run(x).has_value());
  CHECK(fake.votes.empty());
}
