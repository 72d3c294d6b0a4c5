// The files of a `flaxpp train` run in its output_dir, and what resuming from them requires:
// run.json records the settings the checkpoint was made with (TrainConfig::run_identity), and
// a run resumes only when the config agrees with it and the checkpoint holds a state of the
// configured model and optimiser; otherwise it refuses and says what differs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flaxpp/io/train_config.hpp"
#include "flaxpp/train/train_state.hpp"

namespace flaxpp::cli {

struct RunFiles {
  explicit RunFiles(const io::TrainConfig& config);
  // vocab: a language-model run's characters (vocab.json), which `flaxpp generate` reads.
  std::string checkpoint, metrics, curves, record, vocab;
};

// Holds output_dir/train.lock while a run trains there, so that a second run in the same folder
// is refused, naming the first (its process and host). A lock whose process is gone (on this
// host) is taken over, with a note. Creating the lock is also the check that the folder can be
// written, before anything is trained.
class RunLock {
 public:
  explicit RunLock(const io::TrainConfig& config);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  // What happened to a stale lock ("" when there was none).
  const std::string& note() const { return note_; }

 private:
  std::string path_, note_;
};

// Deletes what interrupted atomic writes of these files left behind (their `.tmp-<pid>` files
// whose writing process is gone); returns how many.
std::size_t remove_stale_temporaries(const RunFiles& files);

// Writes run.json: the config's run identity, the data file's SHA-256 (`data_sha256`) and the
// remat policy (JAX's spelling, or "none"), for a run starting from scratch (before its first
// checkpoint) or resumed under changed settings it may change.
void write_run_record(const RunFiles& files, const io::TrainConfig& config,
                      const std::string& data_sha256);

// vocab.json: a language-model run's characters in token-id order, as byte values.
void write_vocab(const std::string& path, const std::string& vocab);
// Reads vocab.json; throws ParseError naming the file when it is damaged or repeats a
// character.
std::string read_vocab(const std::string& path);
// For a resumed language-model run: throws ValueError unless `vocab`, the characters of the
// training text now, are those of vocab.json (the characters the checkpoint's embedding rows
// stand for); writes vocab.json where it is missing.
void accept_vocab(const RunFiles& files, const std::string& vocab);

// What `flaxpp generate` needs of the run a checkpoint belongs to, read from the run.json and
// vocab.json beside it: the run's config (its model, data.seq_len) and its characters. Throws
// ParseError naming the file when one is missing, damaged, or of a run that is not a language
// model.
struct LmRun {
  io::TrainConfig config;
  std::string vocab;
};
LmRun read_lm_run(const std::string& checkpoint);

// Compares the config and the data with run.json. Throws ValueError listing the settings that
// differ and that a resumed run cannot change (data, model, batch_size, seed,
// checkpoint_format), a data file whose content changed (its SHA-256 is not `data_sha256`),
// and a remat policy added or removed (the model's parameters are named differently with and
// without one); returns the changes it may make (the optimiser's settings, whose state
// load_checkpoint_state checks, and one remat policy for another), each as "$.key is NOW now,
// THEN in that run", and what run.json does not record yet (from an older flaxpp), which
// write_run_record then adds. A missing run.json (from an older flaxpp) is not checked.
struct RecordCheck {
  std::vector<std::string> changes;
  std::vector<std::string> unrecorded;  // e.g. "the data's content hash"
};
RecordCheck check_run_record(const RunFiles& files, const io::TrainConfig& config,
                             const std::string& data_sha256);

// How `found` (a checkpoint's `name` tree, "params" or "opt_state") differs from `expected`
// (what `what`, e.g. "the model of $.model.features", makes): the first path missing, extra or
// of another shape or dtype; nullopt where they agree.
std::optional<std::string> tree_difference(const Tree& expected, const Tree& found,
                                           std::string_view name, const std::string& what);

// The state in the checkpoint, on the default device. Throws (naming the checkpoint and saying
// how to go on) when it cannot be read, when its step is negative, or when its parameters or
// optimiser state differ in paths, shapes or dtypes from `fresh` (a state of the configured
// model and optimiser).
train::TrainState load_checkpoint_state(const RunFiles& files, const io::TrainConfig& config,
                                        const train::TrainState& fresh);

}  // namespace flaxpp::cli
