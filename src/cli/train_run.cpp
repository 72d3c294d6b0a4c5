// The files of a `flaxpp train` run and the checks before resuming from them.
#include "cli/train_run.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "flaxpp/io/checkpoint.hpp"

namespace flaxpp::cli {
namespace {

namespace fs = std::filesystem;
using io::Json;

constexpr const char* kRecordFormat = "flaxpp.train_run/1";
constexpr const char* kVocabFormat = "flaxpp.vocab/1";

std::string in_dir(const io::TrainConfig& c, const char* name) {
  return (fs::path(c.output_dir) / name).string();
}

// "f32[64,128]"
std::string aval_text(const Array& a) {
  std::ostringstream s;
  s << a.aval();
  return s.str();
}

// The differences between `recorded` and `now` (two run identities) as "$.key is A here, B in
// the run", depth first.
void differences(const Json& recorded, const Json& now, const std::string& path,
                 std::vector<std::string>& out) {
  if (recorded.is_object() && now.is_object() && path != "$.optimizer") {
    for (const auto& [key, value] : now.items())
      differences(recorded.contains(key) ? recorded[key] : Json(), value, path + "." + key, out);
    return;
  }
  if (recorded != now)
    out.push_back(detail::str(path, " is ", now.dump(), " now, ",
                              recorded.is_null() ? "unset" : recorded.dump(), " in that run"));
}

std::string how_to_go_on(const io::TrainConfig& c) {
  return detail::str(
      "To continue that run, restore the config it was made with; to keep it and "
      "train anew, choose another $.output_dir; to replace it (its checkpoint, "
      "metrics and curves in ",
      c.output_dir, "), pass --fresh");
}

}  // namespace

RunFiles::RunFiles(const io::TrainConfig& c)
    : checkpoint(c.checkpoint_path()),
      metrics(in_dir(c, "metrics.csv")),
      curves(in_dir(c, "curves.png")),
      record(in_dir(c, "run.json")),
      vocab(in_dir(c, "vocab.json")) {}

namespace {

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string("?");
}

// Whether process `pid` of this host is running: it exists and is not a zombie (a process
// killed under mpirun in a container whose init reaps nothing stays one).
bool process_running(long long pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat(detail::str("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return true;  // no /proc: kill's answer stands
  const std::size_t close = line.rfind(')');   // the name in parentheses may hold anything
  return close == std::string::npos || close + 2 >= line.size() ||
         (line[close + 2] != 'Z' && line[close + 2] != 'X');
}

// Creates `path` holding "PID HOST" unless it exists; errno is left for the caller.
bool create_lock(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const std::string text = detail::str(getpid(), " ", host_name(), "\n");
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written) {
    ::unlink(path.c_str());
    errno = EIO;
  }
  return written;
}

}  // namespace

RunLock::RunLock(const io::TrainConfig& c) : path_(in_dir(c, "train.lock")) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (create_lock(path_)) return;
    if (errno != EEXIST)
      throw ValueError(detail::str("$.output_dir: cannot write in ", c.output_dir, " (",
                                   std::strerror(errno), "); choose a directory you can write to"));
    std::ifstream in(path_);
    long long pid = 0;
    std::string host;
    in >> pid >> host;
    const bool gone = host == host_name() && pid > 0 && !process_running(pid);
    if (!gone)
      throw ValueError(detail::str(
          "$.output_dir: ", c.output_dir, " is in use by another flaxpp train (process ", pid,
          " on ", host.empty() ? std::string("an unknown host") : host, ", per ", path_,
          "); wait for it to finish, or choose another output_dir. If that run is gone, delete ",
          path_));
    std::error_code ignored;
    fs::remove(path_, ignored);
    note_ = detail::str("note: took over ", path_, " from process ", pid,
                        ", which is gone (a run that ended without removing it)");
  }
  throw ValueError(detail::str("$.output_dir: cannot take over the lock ", path_,
                               ": another run took it first"));
}

RunLock::~RunLock() {
  std::error_code ignored;
  fs::remove(path_, ignored);
}

std::size_t remove_stale_temporaries(const RunFiles& files) {
  std::size_t removed = 0;
  for (const std::string* f :
       {&files.checkpoint, &files.metrics, &files.curves, &files.record, &files.vocab})
    removed += io::remove_stale_temporaries(*f).size();
  return removed;
}

namespace {

std::string policy_text(const io::TrainConfig& c) {
  return c.model.policy->str();
}

}  // namespace

void write_run_record(const RunFiles& files, const io::TrainConfig& c,
                      const std::string& data_sha256) {
  const Json record{{"format", kRecordFormat},
                    {"run", c.run_identity()},
                    {"data_sha256", data_sha256},
                    {"policy", policy_text(c)}};
  io::write_file_atomically(files.record, record.dump(2) + "\n");
}

void write_vocab(const std::string& path, const std::string& vocab) {
  Json bytes = Json::array();
  for (const char ch : vocab)
    bytes.push_back(static_cast<int>(static_cast<unsigned char>(ch)));
  io::write_file_atomically(path, Json{{"format", kVocabFormat}, {"bytes", bytes}}.dump() + "\n");
}

std::string read_vocab(const std::string& path) {
  const Json vocab = io::read_json_file(path);
  const Json* bytes = vocab.is_object() && vocab.value("format", Json()) == kVocabFormat &&
                              vocab.contains("bytes") && vocab["bytes"].is_array()
                          ? &vocab["bytes"]
                          : nullptr;
  if (bytes == nullptr || bytes->empty())
    throw ParseError(detail::str(path, ": expected {\"format\": \"", kVocabFormat,
                                 "\", \"bytes\": [...]}; the file was changed or damaged"));
  std::string out;
  for (const Json& b : *bytes) {
    if (!b.is_number_integer() || b.get<std::int64_t>() < 0 || b.get<std::int64_t>() > 255)
      throw ParseError(detail::str(path, ": expected byte values 0..255, got ", b.dump()));
    const auto ch = static_cast<char>(b.get<int>());
    if (out.find(ch) != std::string::npos)
      throw ParseError(detail::str(path, ": byte ", b.get<int>(),
                                   " appears twice; each character has one token id. The file "
                                   "was changed or damaged"));
    out.push_back(ch);
  }
  return out;
}

void accept_vocab(const RunFiles& files, const std::string& vocab) {
  if (!fs::exists(files.vocab)) {
    write_vocab(files.vocab, vocab);
    return;
  }
  const std::string recorded = read_vocab(files.vocab);
  if (recorded != vocab)
    throw ValueError(detail::str(
        "the training text's characters differ from those of the run in ",
        fs::path(files.vocab).parent_path().string(), ": ", files.vocab, " has ", recorded.size(),
        " characters, the text now ",
        recorded.size() == vocab.size() ? std::string("as many, but others")
                                        : std::to_string(vocab.size()),
        "; the checkpoint's embedding rows stand for vocab.json's. Train on the run's text, "
        "into another output_dir, or pass --fresh to replace the run"));
}

LmRun read_lm_run(const std::string& checkpoint) {
  if (fs::is_directory(checkpoint))
    throw ParseError(detail::str(checkpoint, ": a directory; give the checkpoint file in it, e.g. ",
                                 (fs::path(checkpoint) / "checkpoint.json").string()));
  const fs::path dir = fs::path(checkpoint).parent_path();
  const std::string record_file = (dir / "run.json").string(),
                    vocab_file = (dir / "vocab.json").string();
  auto need = [](const std::string& f) {
    if (!fs::exists(f))
      throw ParseError(detail::str(f,
                                   ": missing; generate reads the run.json and vocab.json that "
                                   "flaxpp train writes beside a language model's checkpoint"));
  };
  need(record_file);
  const Json record = io::read_json_file(record_file);
  if (!record.is_object() || record.value("format", Json()) != kRecordFormat ||
      !record.contains("run"))
    throw ParseError(detail::str(record_file, ": expected a run record (\"format\": \"",
                                 kRecordFormat,
                                 "\" and \"run\"); the file was changed or damaged"));
  LmRun run;
  try {
    run.config = io::parse_train_config(record["run"].dump(), record_file);
  } catch (const Error& e) {
    throw ParseError(
        detail::str(record_file, ": ", e.what(), " (the run record was changed or damaged)"));
  }
  if (run.config.model.kind != io::TrainConfig::Kind::lm)
    throw ParseError(detail::str(record_file,
                                 ": the run trained an MLP classifier; generate "
                                 "samples text from a language model's checkpoint"));
  need(vocab_file);
  run.vocab = read_vocab(vocab_file);
  return run;
}

RecordCheck check_run_record(const RunFiles& files, const io::TrainConfig& c,
                             const std::string& data_sha256) {
  if (!fs::exists(files.record)) return {};
  const Json record = io::read_json_file(files.record);
  if (!record.is_object() || record.value("format", Json()) != kRecordFormat ||
      !record.contains("run"))
    throw ParseError(detail::str(files.record, ": expected a run record (\"format\": \"",
                                 kRecordFormat,
                                 "\" and \"run\"); the file was changed or "
                                 "damaged. ",
                                 how_to_go_on(c)));
  std::vector<std::string> diffs, refusals;
  RecordCheck check;
  differences(record["run"], c.run_identity(), "$", diffs);
  // The optimiser's settings may change (e.g. a lower learning rate to fine-tune) as long as
  // its state fits (load_checkpoint_state checks); anything else changes what the checkpoint
  // means: the data split and shuffles (data, seed), the step-to-epoch map (batch_size), the
  // model.
  for (auto& d : diffs)
    (d.starts_with("$.optimizer ") ? check.changes : refusals).push_back(std::move(d));
  const bool lm = c.model.kind == io::TrainConfig::Kind::lm;
  const std::string& data_file = lm ? c.data.text : c.data.path;
  if (const Json* hash = record.contains("data_sha256") ? &record["data_sha256"] : nullptr;
      hash == nullptr) {
    check.unrecorded.push_back("the data's content hash");
  } else if (*hash != data_sha256) {
    refusals.push_back(detail::str(
        lm ? "$.data.text " : "$.data.path ", data_file,
        " changed since that run read it: its content's SHA-256 is ", data_sha256.substr(0, 16),
        "… now, ", hash->is_string() ? hash->get<std::string>().substr(0, 16) : hash->dump(),
        "… in that run"));
  }
  const std::string policy = policy_text(c);
  if (const Json* then = record.contains("policy") ? &record["policy"] : nullptr; then == nullptr) {
    check.unrecorded.push_back("the remat policy");
  } else if (*then != policy) {
    const std::string was = then->is_string() ? then->get<std::string>() : then->dump();
    // With a policy the Blocks are remat'd modules, whose parameters Flax names apart.
    const bool tree_changes = (was == "none") != (policy == "none");
    (tree_changes ? refusals : check.changes)
        .push_back(detail::str("$.model.policy is ", policy, " now, ", was, " in that run",
                               tree_changes ? " (a model with a remat policy names its "
                                              "parameters apart from one without)"
                                            : ""));
  }
  if (refusals.empty()) return check;
  std::string list;
  for (const auto& d : refusals)
    list += "\n  " + d;
  throw ValueError(detail::str("the config or its data differ from the run whose checkpoint ",
                               files.checkpoint, " it would resume (recorded in ", files.record,
                               "):", list, "\nResuming would not continue that run. ",
                               how_to_go_on(c)));
}

std::optional<std::string> tree_difference(const Tree& expected_tree, const Tree& found_tree,
                                           std::string_view name, const std::string& what) {
  std::map<std::string, Array> expected, found;
  for (auto& [path, a] : expected_tree.flatten())
    expected.emplace(path, a);
  for (auto& [path, a] : found_tree.flatten())
    found.emplace(path, a);
  for (const auto& [path, a] : expected) {
    const auto it = found.find(path);
    if (it == found.end())
      return detail::str(what, " has ", name, "/", path, " (", aval_text(a),
                         "), which the checkpoint lacks");
    if (it->second.aval() != a.aval())
      return detail::str("the checkpoint's ", name, "/", path, " is ", aval_text(it->second), ", ",
                         what, " makes it ", aval_text(a));
  }
  for (const auto& [path, a] : found)
    if (!expected.count(path))
      return detail::str("the checkpoint has ", name, "/", path, " (", aval_text(a), "), which ",
                         what, " does not have");
  return std::nullopt;
}

train::TrainState load_checkpoint_state(const RunFiles& files, const io::TrainConfig& c,
                                        const train::TrainState& fresh) {
  train::TrainState loaded;
  try {
    loaded = train::TrainState::from_tree(io::load_checkpoint(files.checkpoint));
  } catch (const Error& e) {
    throw ParseError(detail::str(e.what(),
                                 "\nThe checkpoint cannot be resumed; pass --fresh to "
                                 "train from scratch (replacing it)"));
  }
  // The loaded state must be one of the configured model and optimiser, leaf for leaf.
  for (const auto& [name, now, then] :
       {std::tuple{"params", &fresh.params, &loaded.params},
        std::tuple{"opt_state", &fresh.opt_state, &loaded.opt_state},
        std::tuple{"batch_stats", &fresh.batch_stats, &loaded.batch_stats}}) {
    const std::string what = std::string_view(name) == "opt_state" ? "the optimiser of $.optimizer"
                                                                   : "the model of $.model";
    if (const auto why = tree_difference(*now, *then, name, what))
      throw ValueError(detail::str(files.checkpoint, " was not made with this config: ", *why,
                                   ".\nResuming would not continue that run. ", how_to_go_on(c)));
  }
  // Checkpoints load into host memory; training continues on the default device.
  const auto to_device = [](const Array& a) { return a.to(default_device()); };
  loaded.params = tree_map(loaded.params, to_device);
  loaded.opt_state = tree_map(loaded.opt_state, to_device);
  loaded.batch_stats = tree_map(loaded.batch_stats, to_device);
  return loaded;
}

}  // namespace flaxpp::cli
