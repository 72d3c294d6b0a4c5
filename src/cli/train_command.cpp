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
#include <numeric>
#include <optional>
#include <span>
#include <sstream>
#include <tuple>

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
#include "flaxpp/dist/replicated.hpp"
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

// Remat by budget: the step planned for a full batch (this process's shard of it) before the
// first step, and its choice said.
void plan_memory_budget(train::ClassifierStep& step, const train::TrainState& state,
                        const TrainData& data, std::int64_t batch_rows, dist::Communicator* comm,
                        std::int64_t budget) {
  step.set_memory_budget(budget);
  std::int64_t begin = 0, end = batch_rows;
  if (comm != nullptr && comm->size() > 1)
    std::tie(begin, end) = dist::shard_bounds(batch_rows, comm->rank(), comm->size());
  std::vector<std::int64_t> positions(static_cast<std::size_t>(end - begin));
  std::iota(positions.begin(), positions.end(), begin);
  const data::Dataset batch = data.training_rows(positions);
  std::istringstream plan(step.lower(state, batch.x, batch.y).remat_plan()->str());
  for (std::string line; std::getline(plan, line);)
    say(line);
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

// What `flaxpp train` shows and writes as train::fit goes: the progress line, each epoch's
// line, metrics.csv and curves.png (the leader's), run.json when it is to be rewritten, and
// the stop signals (the largest over the job's processes, so that all stop together).
class TrainObserver final : public train::FitObserver {
 public:
  TrainObserver(const io::TrainConfig& c, const TrainData& data, const RunFiles& files,
                const TrainJob& job, Progress& progress, std::vector<EpochMetrics>& history,
                bool record_pending)
      : c_(c),
        data_(data),
        files_(files),
        job_(job),
        progress_(progress),
        history_(history),
        record_pending_(record_pending) {}

  int stop_signal() const { return stop_signal_; }

  bool stop_requested() override {
    stop_signal_ = job_.max(g_signal);  // the same decision on every process
    return stop_signal_ != 0;
  }

  void step_done(const train::StepProgress& p) override {
    progress_.update(
        detail::str("epoch ", p.epoch + 1, "/", c_.epochs), p.batch + 1, p.steps_per_epoch,
        detail::str("loss ", fixed(p.mean_loss, 4), " acc ", fixed(p.batch_accuracy, 3), "  ",
                    fixed(p.rows_per_second, 0), " samples/s  ETA ", fixed(p.seconds_left, 0), "s"),
        p.batch + 1 == p.steps_per_epoch);
  }

  void evaluating(const std::string& what, std::int64_t done, std::int64_t total) override {
    progress_.update(what, done, total, "rows", false);
  }

  void pause() override { progress_.clear(); }

  void epoch_done(const train::EpochMetrics& m) override {
    history_.push_back(m);
    say(detail::str("epoch ", m.epoch, "/", c_.epochs, ": train loss ", fixed(m.train_loss, 4),
                    " acc ", fixed(m.train_accuracy, 4), " | test loss ", fixed(m.test_loss, 4),
                    " acc ", fixed(m.test_accuracy, 4), " | ", fixed(m.seconds, 1), " s"));
    if (job_.leader()) write_metrics(files_.metrics, history_);
  }

  void saved(const train::TrainState&) override {
    if (!job_.leader()) return;
    if (record_pending_) write_run_record(files_, c_, data_.sha256);
    record_pending_ = false;
    // After each epoch's checkpoint, so that a failure to draw (e.g. a full disk) loses
    // nothing.
    if (history_.size() == drawn_rows_) return;
    drawn_rows_ = history_.size();
    try {
      write_curves(files_.curves, history_);
    } catch (const std::exception& e) {
      if (!warned_plot_)
        complain(detail::str("warning: ", files_.curves, " could not be written (", e.what(),
                             "); training goes on"));
      warned_plot_ = true;
    }
  }

  void nonfinite(const std::string& what) override {
    if (!warned_nonfinite_)
      complain("warning: " + what + "; training goes on (\"on_nonfinite\": \"continue\")");
    warned_nonfinite_ = true;
  }

 private:
  const io::TrainConfig& c_;
  const TrainData& data_;
  const RunFiles& files_;
  const TrainJob& job_;
  Progress& progress_;
  std::vector<EpochMetrics>& history_;
  bool record_pending_;
  std::size_t drawn_rows_ = 0;  // history_'s rows when curves.png was last drawn
  bool warned_nonfinite_ = false, warned_plot_ = false;
  int stop_signal_ = 0;
};

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
  if (c.memory_budget > 0)
    plan_memory_budget(step, state, data, std::min(c.batch_size, plan.train_rows),
                       job.communicator(), c.memory_budget);

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
  if (state.step >= plan.total_steps && saved_step >= 0)
    say(detail::str("nothing to train: the checkpoint is at step ", state.step, ", the end of the ",
                    c.epochs, " epochs; pass --fresh to train again from scratch"));

  // The data as train::fit takes it: the training rows by their position in the split's
  // training set, and the test set's.
  const train::Rows train_rows{.count = plan.train_rows,
                               .take = [&](std::span<const std::int64_t> positions) {
                                 return data.training_rows(positions);
                               }};
  const train::Rows test_rows{
      .count = static_cast<std::int64_t>(data.test.size()),
      .take = [&](std::span<const std::int64_t> positions) { return data.test_rows(positions); }};
  Progress progress(job.leader() ? stderr : nullptr);
  TrainObserver observer(c, data, files, job, progress, history, record_pending);

  // Ctrl-C, and SIGTERM (what schedulers and mpirun send), end the run at the next step boundary
  // with a checkpoint; exit 128 + the signal.
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  if (launched()) {
    std::signal(SIGUSR1, on_stop_signal);
    std::signal(SIGUSR2, on_stop_signal);
  }
  const auto start = Clock::now();
  const train::FitResult result =
      train::fit(step, state, train_rows, test_rows,
                 {.epochs = c.epochs,
                  .batch_size = c.batch_size,
                  .seed = static_cast<std::uint64_t>(c.seed),
                  .max_steps = options->max_steps,
                  // Every process passes the path; the leader alone writes it.
                  .checkpoint = files.checkpoint,
                  .resume = false,  // resumed above, with the run's checks
                  .saved_step = saved_step,
                  .on_nonfinite = c.on_nonfinite},
                 observer);
  using End = train::FitResult::End;
  switch (result.end) {
    case End::nonfinite:
      complain(detail::str(result.nonfinite, "; stopped without saving that state: ",
                           result.saved_step >= 0
                               ? detail::str(files.checkpoint, " keeps step ", result.saved_step,
                                             ", the last finite one")
                               : std::string("no finite state was saved yet"),
                           ". Lower the learning rate ($.optimizer), check the data, or set "
                           "\"on_nonfinite\": \"continue\" to train on regardless."));
      return 1;
    case End::max_steps:
    case End::stop_requested: {
      const bool interrupted = result.end == End::stop_requested;
      if (!interrupted && result.steps_taken == 0 && saved_step >= 0) {
        say(detail::str("already at step ", state.step, " (--max-steps ", *options->max_steps,
                        "): no step taken; ", files.checkpoint, " is unchanged"));
        return 0;
      }
      say(detail::str(interrupted ? "interrupted" : "stopped", " at step ", state.step,
                      ": checkpoint saved to ", files.checkpoint, " (", peak_memory(),
                      "); run the same command again to resume"));
      return interrupted ? 128 + observer.stop_signal() : 0;
    }
    case End::finished:
      break;
  }
  say(detail::str("metrics: ", files.metrics,
                  plots_available() ? ", curves: " + files.curves : std::string(),
                  ", checkpoint: ", files.checkpoint, " (", fixed(seconds_since(start), 1), " s, ",
                  peak_memory(), ")"));
  say("test accuracy: " + fixed(result.test_accuracy, 4));
  return 0;
}

}  // namespace flaxpp::cli
