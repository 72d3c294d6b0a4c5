// `flaxpp train CONFIG.json [--max-steps N] [--fresh | --resume]`: the training loop. Trains the
// model the config describes (io/train_config, cli/train_model: the MLP classifier or the
// character-level language model), evaluates after each epoch, writes the
// epoch's metrics row, then its checkpoint, then the curves; resumes from a checkpoint to an
// identical continuation; stops on a non-finite loss without saving it. Ends with the line
// "test accuracy: 0.NNNN". Under a launcher, data-parallel over the job's processes (TrainJob).
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <span>
#include <sstream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/mpirun.hpp"
#include "cli/progress.hpp"
#include "cli/train_data.hpp"
#include "cli/train_job.hpp"
#include "cli/train_metrics.hpp"
#include "cli/train_model.hpp"
#include "cli/train_plot.hpp"
#include "cli/train_run.hpp"
#include "flaxpp/core/host_memory.hpp"
#include "flaxpp/data/dataset.hpp"
#include "flaxpp/dist/process_group.hpp"
#include "flaxpp/io/checkpoint.hpp"
#include "flaxpp/io/train_config.hpp"
#include "flaxpp/train/train_state.hpp"

namespace flaxpp::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// "peak memory 361 MB": this process's, for the run's closing lines.
std::string peak_memory() {
  return "peak memory " + format_bytes(static_cast<double>(peak_host_memory()));
}

// The training-set rows that each epoch's train loss and accuracy are measured on, at most.
constexpr std::size_t kTrainSampleRows = 10000;

constexpr const char* kTrainUsage =
    "usage: flaxpp train CONFIG.json [--max-steps N] [--fresh | --resume]\n"
    "  Trains the model CONFIG describes (see README.md): an MLP classifier on a CSV file\n"
    "  (examples/digits.json), or a character-level language model on a text file\n"
    "  (examples/lm.json; flaxpp generate samples from it), writing metrics.csv, curves.png,\n"
    "  run.json (and vocab.json) and a checkpoint into its output_dir. When\n"
    "  output_dir holds a checkpoint of the same run, training resumes from it (config key\n"
    "  \"resume\", default true); a checkpoint made with other settings is refused, naming them.\n"
    "  Ctrl-C (SIGINT) or SIGTERM saves a checkpoint at the next step boundary and exits (130,\n"
    "  143). The last line is \"test accuracy: 0.NNNN\".\n"
    "  --max-steps N  stop (with a checkpoint) once the run has taken N steps in all, counting\n"
    "                 the resumed ones; 0 saves the initial state without training\n"
    "  --fresh        train from scratch, replacing a previous run in output_dir\n"
    "  --resume       resume from output_dir's checkpoint even if the config says \"resume\": "
    "false\n"
    "  A NaN or infinite loss stops training with exit code 1 and keeps the last finite\n"
    "  checkpoint (config key \"on_nonfinite\": \"stop\", the default; \"continue\" trains on).\n"
    "  Under a launcher (mpirun -np N flaxpp train ..., or flaxpp launch -n N -- train ...)\n"
    "  the N processes train data-parallel: each takes its shard of every batch, gradients\n"
    "  are averaged across them, and process 0 alone writes the files and the output; the\n"
    "  result is the one-process run's up to summation order, and either resumes the other.\n"
    "  Exit codes: 0 done or stopped by --max-steps, 1 non-finite loss, 2 bad command line,\n"
    "  config, data or checkpoint, 130/143 interrupted (SIGINT/SIGTERM). In a job of several\n"
    "  processes an error on any of them ends them all.\n";

// The first of SIGINT and SIGTERM this process received (0: none); under flaxpp launch,
// SIGUSR1 and SIGUSR2 stand for them (kLaunchStopSignalsEnv).
std::atomic<int> g_signal{0};
extern "C" void on_stop_signal(int signal) {
  int none = 0;
  g_signal.compare_exchange_strong(none, launched_stop_signal(signal));
}

struct Options {
  std::string config_file;
  std::optional<std::int64_t> max_steps;
  std::optional<bool> resume;  // --fresh / --resume over the config's "resume"
};

// nullopt for --help (printed).
std::optional<Options> parse_options(const std::vector<std::string>& args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kTrainUsage;
      return std::nullopt;
    } else if (a == "--max-steps" || a.starts_with("--max-steps=")) {
      const std::string value = a == "--max-steps" ? option_value(args, i) : a.substr(12);
      o.max_steps =
          parse_int_option("--max-steps", value, 0, std::numeric_limits<std::int64_t>::max());
    } else if (a == "--fresh" || a == "--resume") {
      if (o.resume && *o.resume != (a == "--resume"))
        throw UsageError("--fresh and --resume contradict each other; give one of them");
      o.resume = a == "--resume";
    } else if (a.starts_with("-")) {
      throw UsageError(detail::str("unknown option ", a));
    } else if (!o.config_file.empty()) {
      throw UsageError(detail::str("one config file at a time; got ", o.config_file, " and ", a));
    } else {
      o.config_file = a;
    }
  }
  if (o.config_file.empty()) throw UsageError("no config file given");
  return o;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Whether this process speaks: the leader of a data-parallel job (and a process on its own).
bool g_speaks = true;

// A line on stdout, flushed at once so that it keeps its place among stderr's lines in a log.
void say(const std::string& line) {
  if (g_speaks) std::cout << line << std::endl;
}

// The same on stderr.
void complain(const std::string& line) {
  if (g_speaks) std::cerr << ("flaxpp train: " + line + "\n") << std::flush;
}

// v with `digits` decimals; NaN (of either sign) as "nan".
std::string fixed(double v, int digits) {
  if (std::isnan(v)) return "nan";
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

void create_output_dir(const io::TrainConfig& c) {
  std::error_code ec;
  fs::create_directories(c.output_dir, ec);
  if (ec || !fs::is_directory(c.output_dir))
    throw ValueError(detail::str("$.output_dir: cannot create the directory ", c.output_dir, " (",
                                 ec ? ec.message() : "a file of that name exists",
                                 "); choose a directory you can write to"));
}

}  // namespace

int train_command(const std::vector<std::string>& args) {
  const std::optional<Options> options = parse_options(args);
  if (!options) return 0;
  io::TrainConfig c = io::read_train_config(options->config_file);
  if (options->resume) c.resume = *options->resume;
  if (c.device) {
    try {
      set_default_device(*c.device);
    } catch (const DeviceError& e) {
      throw DeviceError(detail::str("$.device: ", e.what()));
    }
  }
  const TrainJob job = TrainJob::join();
  g_speaks = job.leader();
  const RunFiles files(c);
  if (job.leader()) create_output_dir(c);
  // One run per output_dir; taking the lock also proves the folder can be written.
  std::optional<RunLock> lock;
  if (job.leader()) lock.emplace(c);
  if (lock && !lock->note().empty()) say(lock->note());
  if (const std::size_t n = job.leader() ? remove_stale_temporaries(files) : 0)
    say(detail::str("removed ", n, " temporary file", n == 1 ? "" : "s",
                    " left by an interrupted run in ", c.output_dir));
  const TrainData data = load_train_data(c);
  job.check_agreement(c, data);
  const TrainPlan plan = plan_training(c, data);
  job.check_shards(c, plan, data);
  // The training set's metrics are of the epoch's last parameters on a bounded sample of it (its
  // first rows in the split's random order), so that an epoch's evaluation costs no more than
  // kTrainSampleRows rows of forward passes however large the data; the test set's are of all
  // of it. Each process evaluates its shard, a batch at a time.
  const std::span<const std::int64_t> train_sample =
      std::span(data.train).first(std::min(data.train.size(), kTrainSampleRows));
  const std::vector<std::int64_t> train_shard = job.shard(train_sample),
                                  test_shard = job.shard(data.test);
  if (c.batch_size > plan.train_rows)
    say(detail::str("note: $.batch_size ", c.batch_size, " exceeds the ", plan.train_rows,
                    " training rows; each epoch is one batch of them all"));
  if (!plots_available()) say("note: curves.png is not drawn: " + why_no_plots());
  say(detail::str("training on ", default_device(),
                  job.distributed() ? detail::str(" in each of ", dist::describe()) : ""));

  const TrainModel model = train_model(
      c.model, c.data.seq_len, static_cast<std::int64_t>(data.vocab.size()), job.distributed());
  train::ClassifierStep step(model.apply, c.optimizer);
  step.set_communicator(job.communicator());
  // The parameters come from key(seed) itself (as before dropout existed); the dropout masks
  // from the second key of its split.
  if (c.model.dropout > 0.0) step.set_dropout_key(random::split(random::key(c.seed))[1]);
  const Tree variables =
      model.init(random::key(c.seed), data.training_rows(std::vector<std::int64_t>{0}).x);
  train::TrainState state = step.init(
      variables["params"], variables.contains("batch_stats") ? variables["batch_stats"] : Tree());
  Progress progress(job.leader() ? stderr : nullptr);
  // Mean loss and accuracy of the parameters over `rows` (this process's), a batch at a time,
  // its progress shown as `what`.
  auto evaluate = [&](const train::TrainState& s, const std::vector<std::int64_t>& rows,
                      const std::string& what) {
    const auto n = static_cast<std::int64_t>(rows.size());
    const auto result =
        step.evaluate(s, n, plan.batch_rows, [&](std::int64_t begin, std::int64_t end) {
          progress.update(what, begin, n, "rows", false);
          const data::Dataset b = data.take(std::span(rows).subspan(
              static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)));
          return std::pair{b.x, b.y};
        });
    progress.clear();
    return result;
  };

  const std::int64_t spe = plan.steps_per_epoch;
  std::int64_t saved_step = -1;  // the step of the checkpoint on disk (-1: none of this run)
  std::vector<EpochMetrics> history;
  bool record_pending = false;  // run.json is to be rewritten after the next checkpoint
  if (!job.leader()) {
    // The leader's state, below.
  } else if (c.resume && fs::exists(files.checkpoint)) {
    // Nothing in output_dir is written until the run is accepted.
    const RecordCheck check = check_run_record(files, c, data.sha256);
    if (!data.vocab.empty()) accept_vocab(files, data.vocab);
    const bool recorded = fs::exists(files.record);
    state = load_checkpoint_state(files, c, state);
    saved_step = state.step;
    std::int64_t torn = 0;
    history = read_metrics(files.metrics, state.step, &torn);
    say(detail::str("resuming from ", files.checkpoint, " at step ", state.step,
                    state.step < plan.total_steps
                        ? detail::str(" (epoch ", state.step / spe + 1, ", batch ",
                                      state.step % spe + 1, " of ", spe, ")")
                        : std::string()));
    for (const std::string& change : check.changes)
      say(detail::str("note: resuming with a changed ",
                      change.starts_with("$.optimizer") ? "optimiser" : "remat policy", ": ",
                      change));
    if (!check.unrecorded.empty()) {
      std::string what;
      for (const std::string& u : check.unrecorded)
        what += (what.empty() ? "" : " and ") + u;
      say(detail::str("note: ", files.record, " does not record ", what,
                      " (a run of an older flaxpp): recording this run's, unchecked"));
    }
    if (!recorded)
      say(detail::str("note: ", files.record,
                      " is missing (a run of an older flaxpp): the data, "
                      "batch_size and seed cannot be compared with that run's; recording this "
                      "config's"));
    // Recorded with the first checkpoint made under the new settings.
    record_pending = !recorded || !check.changes.empty() || !check.unrecorded.empty();
    const std::int64_t finished = std::min(state.step, plan.total_steps) / spe;
    if (static_cast<std::int64_t>(history.size()) < finished || torn > 0)
      say(detail::str("note: ", files.metrics, " has ", history.size(), " rows for the ", finished,
                      " epochs before step ", state.step,
                      torn > 0 ? detail::str(" and ", torn, " unreadable lines (skipped)") : "",
                      "; missing rows cannot be recovered"));
  } else {
    if (fs::exists(files.checkpoint))
      say(detail::str("starting from scratch (", options->resume ? "--fresh" : "\"resume\": false",
                      "): replacing the run in ", c.output_dir));
    std::error_code ignored;  // a file that cannot be removed cannot be replaced either: said then
    for (const std::string* f : {&files.checkpoint, &files.metrics, &files.curves})
      fs::remove(*f, ignored);
    write_run_record(files, c, data.sha256);
    if (!data.vocab.empty()) write_vocab(files.vocab, data.vocab);
  }
  job.share_leader_state(state, saved_step);

  const bool stop_on_nonfinite = c.on_nonfinite == io::OnNonfinite::stop;
  // Stops without saving: the checkpoint on disk (if any) is the last finite state.
  auto nonfinite_stop = [&](const std::string& what) {
    complain(detail::str(what, "; stopped without saving that state: ",
                         saved_step >= 0 ? detail::str(files.checkpoint, " keeps step ", saved_step,
                                                       ", the last finite one")
                                         : std::string("no finite state was saved yet"),
                         ". Lower the learning rate ($.optimizer), check the data, or set "
                         "\"on_nonfinite\": \"continue\" to train on regardless."));
    return 1;
  };
  bool warned_nonfinite = false, warned_plot = false;
  // The step whose parameters the last epoch's evaluation saw (every process alike), and its
  // test accuracy.
  std::pair<std::int64_t, float> last_test{-1, 0.0f};
  auto warn_nonfinite = [&](const std::string& what) {
    if (!warned_nonfinite)
      complain("warning: " + what + "; training goes on (\"on_nonfinite\": \"continue\")");
    warned_nonfinite = true;
  };
  // Saves the state, unless it is not finite and the config says stop (then returns false).
  auto save = [&]() -> bool {
    if (stop_on_nonfinite) {
      for (const auto& [name, tree] :
           {std::pair{"params", &state.params}, std::pair{"opt_state", &state.opt_state},
            std::pair{"batch_stats", &state.batch_stats}})
        if (const auto path = first_nonfinite(*tree)) {
          nonfinite_stop(detail::str("the ", name, " leaf ", *path, " became non-finite by step ",
                                     state.step));
          return false;
        }
    }
    job.check_replicas(state);
    if (job.leader()) io::save_checkpoint(files.checkpoint, state.to_tree());
    saved_step = state.step;
    if (record_pending && job.leader()) write_run_record(files, c, data.sha256);
    record_pending = false;
    return true;
  };

  // Ctrl-C, and SIGTERM (what schedulers and mpirun send), end the run at the next step boundary
  // with a checkpoint; exit 128 + the signal.
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  if (launched()) {
    std::signal(SIGUSR1, on_stop_signal);
    std::signal(SIGUSR2, on_stop_signal);
  }
  const auto start = Clock::now();
  auto epoch_start = start;
  std::vector<std::vector<std::int64_t>> batches;
  std::int64_t batches_epoch = -1, done = 0, steps_this_run = 0;
  double loss_sum = 0;
  float batch_accuracy = 0;  // of a recent batch, measured every 10th step
  if (state.step >= plan.total_steps && saved_step >= 0)
    say(detail::str("nothing to train: the checkpoint is at step ", state.step, ", the end of the ",
                    c.epochs, " epochs; pass --fresh to train again from scratch"));
  bool stopped = false, interrupted = false;
  int stop_signal = 0;
  while (state.step < plan.total_steps) {
    stop_signal = job.max(g_signal);  // the same decision on every process
    interrupted = stop_signal != 0;
    if (interrupted || (options->max_steps && state.step >= *options->max_steps)) {
      stopped = true;
      break;
    }
    const std::int64_t epoch = state.step / spe, b = state.step % spe;
    if (epoch != batches_epoch) {
      batches = data::epoch_batches(plan.train_rows, c.batch_size,
                                    static_cast<std::uint64_t>(c.seed), epoch, false);
      batches_epoch = epoch;
      epoch_start = Clock::now();
      loss_sum = 0;
      done = 0;
    }
    const data::Dataset batch = data.training_rows(job.shard(batches[static_cast<std::size_t>(b)]));
    const float loss = step(state, batch.x, batch.y);
    ++steps_this_run;
    if (!std::isfinite(loss)) {
      const std::string what =
          detail::str("the loss became ", fixed(loss, 4), " at step ", state.step, " (epoch ",
                      epoch + 1, ", batch ", b + 1, " of ", spe, ")");
      if (stop_on_nonfinite) {
        progress.clear();
        return nonfinite_stop(what);
      }
      warn_nonfinite(what);
    }
    if (done % 10 == 0) batch_accuracy = step.evaluate(state, batch.x, batch.y).second;
    loss_sum += loss;
    ++done;
    const double secs = seconds_since(epoch_start);
    const double eta =
        secs / static_cast<double>(done) * static_cast<double>(plan.total_steps - state.step);
    progress.update(
        detail::str("epoch ", epoch + 1, "/", c.epochs), b + 1, spe,
        detail::str("loss ", fixed(loss_sum / static_cast<double>(done), 4), " acc ",
                    fixed(batch_accuracy, 3), "  ",
                    fixed(static_cast<double>(done * plan.batch_rows) / std::max(secs, 1e-9), 0),
                    " samples/s  ETA ", fixed(eta, 0), "s"),
        b + 1 == spe);
    if (state.step % spe != 0) continue;

    // The epoch's end: its metrics row first, then the checkpoint, so that no row is lost (a
    // resumed run drops rows past its checkpoint and writes them again).
    progress.clear();
    const auto [train_loss, train_acc] = evaluate(state, train_shard, "evaluate train");
    const auto [test_loss, test_acc] = evaluate(state, test_shard, "evaluate test");
    last_test = {state.step, test_acc};
    if (!std::isfinite(train_loss) || !std::isfinite(test_loss)) {
      const bool train_bad = !std::isfinite(train_loss);
      const std::string what = detail::str(
          "the loss over the ", train_bad ? "training" : "test", " set became ",
          fixed(train_bad ? train_loss : test_loss, 4), " at the end of epoch ", epoch + 1);
      if (stop_on_nonfinite) return nonfinite_stop(what);
      warn_nonfinite(what);
    }
    const double epoch_secs = seconds_since(epoch_start);
    history.push_back(
        {epoch + 1, state.step, train_loss, train_acc, test_loss, test_acc, epoch_secs});
    say(detail::str("epoch ", epoch + 1, "/", c.epochs, ": train loss ", fixed(train_loss, 4),
                    " acc ", fixed(train_acc, 4), " | test loss ", fixed(test_loss, 4), " acc ",
                    fixed(test_acc, 4), " | ", fixed(epoch_secs, 1), " s"));
    if (job.leader()) write_metrics(files.metrics, history);
    if (!save()) return 1;
    if (job.leader()) {
      try {
        write_curves(files.curves, history);
      } catch (const std::exception& e) {  // e.g. a full disk: the checkpoint is saved already
        if (!warned_plot)
          complain(detail::str("warning: ", files.curves, " could not be written (", e.what(),
                               "); training goes on"));
        warned_plot = true;
      }
    }
  }
  progress.clear();
  if (stopped) {
    if (!interrupted && steps_this_run == 0 && saved_step >= 0) {
      say(detail::str("already at step ", state.step, " (--max-steps ", *options->max_steps,
                      "): no step taken; ", files.checkpoint, " is unchanged"));
      return 0;
    }
    if (state.step != saved_step && !save()) return 1;
    say(detail::str(interrupted ? "interrupted" : "stopped", " at step ", state.step,
                    ": checkpoint saved to ", files.checkpoint, " (", peak_memory(),
                    "); run the same command again to resume"));
    return interrupted ? 128 + stop_signal : 0;
  }
  // The last epoch's evaluation is of these parameters already, unless the run took no step.
  const float test_acc = last_test.first == state.step
                             ? last_test.second
                             : evaluate(state, test_shard, "evaluate test").second;
  say(detail::str("metrics: ", files.metrics,
                  plots_available() ? ", curves: " + files.curves : std::string(),
                  ", checkpoint: ", files.checkpoint, " (", fixed(seconds_since(start), 1), " s, ",
                  peak_memory(), ")"));
  say("test accuracy: " + fixed(test_acc, 4));
  return 0;
}

}  // namespace flaxpp::cli
