// `flaxpp bench --processes 1,2`: data-parallel training steps of the benchmark MLP as jobs of
// N processes under mpirun (one product thread per process, so that they do not fight over the
// cores), with a fixed batch per process (weak scaling, as DDP is measured). One JSON line per
// N: step time, samples/s, the scaling efficiency against one process, and the share of the
// step spent in collectives.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace flaxpp::cli {

struct DataParallelBench {
  std::vector<std::int64_t> processes;  // e.g. {1, 2}
  std::int64_t width = 512, depth = 4;
  std::int64_t batch = 128;  // per process
  std::int64_t steps = 20;
  std::optional<std::string> device;  // --device, passed on to the processes
};

// "1,2,4" (1 to 1024 each, no repeats); UsageError naming --processes otherwise.
std::vector<std::int64_t> parse_process_counts(const std::string& text);

// Runs a job of each size in turn (`flaxpp bench --data-parallel-worker ...` under mpirun) and
// writes its line to `out`, with scaling_efficiency = samples/s over N times the samples/s of
// the smallest job's per process. Returns the exit code.
int bench_processes(const DataParallelBench& bench, std::ostream& out);

// Inside a job: times the steps; process 0 prints the JSON line on stdout.
int bench_data_parallel_worker(const DataParallelBench& bench);

}  // namespace flaxpp::cli
