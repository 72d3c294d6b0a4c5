// Data-parallel benchmark: a parent that starts jobs of N processes, and the worker each runs.
#include "cli/bench_data_parallel.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <numeric>

#include "cli/args.hpp"
#include "cli/bench_common.hpp"
#include "cli/mpirun.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/dist/communicator.hpp"
#include "flaxpp/dist/process_group.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/random/key.hpp"
#include "tools/mlp_apply.hpp"
#include "flaxpp/train/train_state.hpp"

namespace flaxpp::cli {

std::vector<std::int64_t> parse_process_counts(const std::string& text) {
  std::vector<std::int64_t> counts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    counts.push_back(parse_int_option("--processes", text.substr(start, comma - start), 1, 1024));
    start = comma + 1;
  }
  std::vector<std::int64_t> sorted = counts;
  std::ranges::sort(sorted);
  if (std::ranges::adjacent_find(sorted) != sorted.end())
    throw UsageError(detail::str("--processes ", text, ": each count once"));
  return counts;
}

namespace {

// `arg` quoted for the shell.
std::string quoted(const std::string& arg) {
  std::string q = "'";
  for (const char c : arg)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The worker's JSON line of a job of `n` processes (its stdout), or a thrown Error.
io::Json run_job(const DataParallelBench& b, std::int64_t n) {
  std::vector<std::string> args = {"bench", "--data-parallel-worker", "--width",
                                   std::to_string(b.width), "--batch", std::to_string(b.batch),
                                   "--steps", std::to_string(b.steps)};
  if (b.device) args.insert(args.end(), {"--device", *b.device});
  std::string command;
  for (const std::string& a : mpirun_command(n, args))
    command += quoted(a) + " ";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) throw Error(detail::str("cannot start ", command));
  std::string output;
  char chunk[4096];
  while (const std::size_t got = std::fread(chunk, 1, sizeof chunk, pipe.get()))
    output.append(chunk, got);
  const int status = ::pclose(pipe.release());
  if (status != 0)
    throw Error(detail::str("the job of ", n, " processes failed (", command, "exit status ",
                            WIFEXITED(status) ? WEXITSTATUS(status) : status,
                            WIFEXITED(status) && WEXITSTATUS(status) == 127
                                ? "): " + no_mpirun_hint(mpirun_command(n, {})[0])
                                : std::string(")")));
  const std::size_t line = output.rfind("{\"");
  if (line == std::string::npos)
    throw Error(detail::str("the job of ", n, " processes printed no result:\n", output));
  return io::parse_json(output.substr(line), detail::str("the job of ", n, " processes"));
}

}  // namespace

int bench_processes(const DataParallelBench& b, std::ostream& out) {
  set_product_threads(1, true);
  double per_process_base = 0;  // samples/s per process of the smallest job
  std::vector<std::int64_t> order = b.processes;
  std::ranges::sort(order);
  for (const std::int64_t n : order) {
    std::cerr << "bench: data parallel, " << n << " process" << (n == 1 ? "" : "es") << ", width "
              << b.width << ", batch " << b.batch << " per process\n";
    io::Json line = run_job(b, n);
    const double samples = line["samples_per_s"].get<double>();
    if (per_process_base == 0) per_process_base = samples / static_cast<double>(n);
    line["scaling_efficiency"] = samples / (static_cast<double>(n) * per_process_base);
    out << line.dump() << std::endl;
  }
  return 0;
}

int bench_data_parallel_worker(const DataParallelBench& b) {
  dist::init();
  const int rank = dist::rank(), n = dist::world_size();
  dist::Communicator& comm = dist::world();
  const nn::MLP mlp = bench_mlp(b.width, b.depth, DType::f32);
  // Each process's shard of the global batch.
  const Array x = bench_inputs(Shape{b.batch, b.width}, 1 + static_cast<std::uint32_t>(rank));
  const Array y = bench_labels(b.batch, 1000 + static_cast<std::uint32_t>(rank));
  train::ClassifierStep step(train::mlp_apply(mlp, checkpoint_policies::none()), optim::sgd(0.01));
  step.set_communicator(n > 1 ? &comm : nullptr);
  train::TrainState state = step.init(nn::Model(mlp).init(random::key(0), x)["params"]);
  for (int i = 0; i < 3; ++i)
    (void)step(state, x, y);  // warm-up: the first traces
  comm.barrier();
  comm.reset_stats();
  std::vector<double> times;
  for (std::int64_t i = 0; i < b.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)step(state, x, y);  // the loss as a float: the step has finished
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const dist::CommunicatorStats stats = comm.stats();
  const double total_ms = std::accumulate(times.begin(), times.end(), 0.0);
  const double ms = median(times);
  const double steps = static_cast<double>(b.steps);
  if (rank == 0)
    std::cout << io::Json{{"framework", "flaxpp"},
                          {"benchmark", "data_parallel"},
                          {"backend", default_device().kind == DeviceKind::cpu ? "cpu" : "cuda"},
                          {"processes", n},
                          {"width", b.width},
                          {"depth", b.depth},
                          {"batch_per_process", b.batch},
                          {"global_batch", b.batch * n},
                          {"steps", b.steps},
                          {"step_ms", ms},
                          {"samples_per_s", static_cast<double>(b.batch * n) / (ms / 1000.0)},
                          {"comm_ms_per_step", stats.seconds * 1000.0 / steps},
                          {"comm_share", stats.seconds * 1000.0 / total_ms},
                          {"comm_calls_per_step", static_cast<double>(stats.calls) / steps},
                          {"comm_bytes_per_step", static_cast<double>(stats.bytes) / steps}}
                     .dump()
              << std::endl;
  return 0;
}

}  // namespace flaxpp::cli
