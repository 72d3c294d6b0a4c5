// flaxpp/io/refs.hpp — reference cases (format flaxpp.refs/1, shared/docs/refs-format.md):
// the problem registry, typed access to a case's inputs, tolerance comparison, and the
// checker behind `flaxpp check`. Tests run committed reference files through check_file(),
// the same code path as the command-line tool.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "flaxpp/core/device.hpp"
#include "flaxpp/core/tree.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/transforms/autodiff.hpp"

namespace flaxpp::refs {

inline constexpr std::string_view kFormat = "flaxpp.refs/1";
using io::Json;

// A case's input is missing, malformed or out of range; the message names the input's path.
class InputError : public ValueError {
 public:
  using ValueError::ValueError;
};

// Typed, path-aware access to the "inputs" object of a case (or to a nested object in it).
class Inputs {
 public:
  Inputs(const Json& object, std::string path);

  bool has(std::string_view key) const;
  std::vector<std::string> keys() const;
  // Integers accept a float with an integral value (3.0), as the Flax originals cast with int().
  std::int64_t integer(std::string_view key) const;
  std::int64_t integer(std::string_view key, std::int64_t fallback) const;
  double number(std::string_view key) const;
  double number(std::string_view key, double fallback) const;
  bool boolean(std::string_view key, bool fallback) const;
  std::string string(std::string_view key) const;
  // A list of non-negative integers.
  Shape shape(std::string_view key) const;
  // An int or a list of ints (JAX's `int | Sequence[int]` axis arguments).
  std::vector<std::int64_t> int_list(std::string_view key) const;
  Array array(std::string_view key) const;
  // A uint32[2] key-data array.
  random::Key key(std::string_view key, random::ThreefryMode mode) const;
  // A nested object (absent = empty object when `optional`).
  Inputs object(std::string_view key, bool optional = false) const;
  const Json& raw(std::string_view key) const;
  // Throws InputError naming the first key not in `accepted` (e.g. an argument an
  // initialiser does not take).
  void expect_only(std::initializer_list<std::string_view> accepted, std::string_view what) const;
  void expect_only(std::span<const std::string_view> accepted, std::string_view what) const;
  const std::string& path() const { return path_; }

 private:
  std::string at(std::string_view key) const { return path_ + "." + std::string(key); }
  const Json* object_;
  std::string path_;
};

// A case ran past its time limit (CaseContext::deadline).
class CaseTimeout : public Error {
 public:
  using Error::Error;
};

struct CaseContext {
  random::ThreefryMode mode =
      random::ThreefryMode::partitionable;  // from versions.jax_threefry_partitionable
  Device device = Device::cpu();            // where the computation runs
  // When the case must stop. Problems call check_time() between the steps of long
  // computations (training steps, layers); it throws CaseTimeout once the deadline has passed.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  void check_time() const;
};

// A list of JSON records, compared exactly and as a multiset (saved_residuals' entries).
struct Records {
  std::vector<Json> items;
};

// What a problem computes from a case's inputs: an array or a tree of arrays (compared with
// the case's tolerances), or records.
using Outcome = std::variant<Tree, Records>;

// saved_residuals' records, as a saved_residuals case expects them: one {"dtype", "shape",
// "kind"} per residual, the kind from JAX's description as refs-format.md says ("argument",
// "named:<name>", "dot_general", …).
Records residual_records(const std::vector<SavedResidual>& residuals);
using Problem = std::function<Outcome(const Inputs& inputs, const CaseContext& context)>;

class ProblemRegistry {
 public:
  // Every problem flaxpp implements.
  static const ProblemRegistry& builtin();

  void add(std::string name, Problem problem);
  const Problem* find(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<std::pair<std::string, Problem>> problems_;
};

// The families of the registry, one registration function per source file.
void register_random_problems(ProblemRegistry& registry);
void register_remat_problems(ProblemRegistry& registry);
void register_nn_problems(ProblemRegistry& registry);
void register_train_problems(ProblemRegistry& registry);
void register_transformer_problems(ProblemRegistry& registry);
void register_control_flow_problems(ProblemRegistry& registry);
void register_jnp_problems(ProblemRegistry& registry);
void register_vmap_problems(ProblemRegistry& registry);
void register_cnn_problems(ProblemRegistry& registry);

// The remat family's functions of (w1, w2, x) (refs-format.md, "The seed problems"):
// f = sum((relu(x @ w1) @ w2) ** 2), and g, the same with checkpoint_name "a" (x @ w1),
// "b" (relu) and "c" (@ w2).
std::vector<Array> dot_policy_f(std::span<const Array> w1_w2_x);
std::vector<Array> named_dot_policy_g(std::span<const Array> w1_w2_x);

struct Tolerance {
  double rtol = 1e-5;
  double atol = 1e-6;
  std::optional<double> ulp;  // float32 steps
};

// Compares `got` with `want` (already rounded to its declared dtype): tree paths, dtypes and
// shapes exactly; integer and bool data exactly; floats by |got-want| <= atol + rtol*|want|
// or, with ulp, at most ulp float32 steps apart; NaN matches NaN only, ±inf exactly.
// Returns nothing when they match, else a message naming the first offending path with
// got/want and the max abs and rel error over that leaf.
std::optional<std::string> compare(const Tree& got, const Tree& want, const Tolerance& tolerance);

// Compares records with the expected JSON list as multisets; a message naming the missing
// and unexpected records when they differ.
std::optional<std::string> compare_records(const Records& got, const Json& want,
                                           const std::string& path);

struct CaseResult {
  std::string id;
  bool passed = false;
  std::string message;  // why it failed
  // It failed with an exception that is not a flaxpp::Error: a bug in flaxpp, not in the case.
  bool internal_error = false;
};

struct FileResult {
  std::string file;
  std::optional<std::string> error;  // the file failed as a whole (not JSON, no format/cases, …)
  std::vector<CaseResult> cases;
};

// The default of CheckOptions::case_timeout (and of `flaxpp check --case-timeout`): generous,
// as the largest committed cases take seconds.
inline constexpr std::chrono::seconds kDefaultCaseTimeout{300};

struct CheckOptions {
  // A case still running this long after it started fails with a message naming the limit
  // (checked between the steps of its computation: see CaseContext). Zero: no limit.
  std::chrono::milliseconds case_timeout = kDefaultCaseTimeout;
  // Called as each case starts, with "FILE: $.cases[i]" (e.g. for a watchdog that stops a case
  // stuck inside one long computation), and as each one ends.
  std::function<void(const std::string& case_label)> on_case_start;
  std::function<void(const CaseResult& result)> on_case_done;
};

// Runs every case of one document / file on `device`.
FileResult check_document(const Json& document, const std::string& name, Device device,
                          const ProblemRegistry& registry = ProblemRegistry::builtin(),
                          const CheckOptions& options = {});
FileResult check_file(const std::string& filename, Device device,
                      const ProblemRegistry& registry = ProblemRegistry::builtin(),
                      const CheckOptions& options = {});

struct CheckSummary {
  std::int64_t passed = 0, failed = 0;
  bool file_errors = false;
  // 0: all passed; 1: a case failed; 2: a file failed as a whole.
  int exit_code() const { return file_errors ? 2 : (failed > 0 ? 1 : 0); }
};

// `flaxpp check`: checks every file, printing each failing case (every case with verbose),
// each file error, and finally the line "N passed, M failed". Each case is printed (and `out`
// flushed) as it ends, after `options.on_case_done` is called.
CheckSummary check_files(const std::vector<std::string>& filenames, Device device, bool verbose,
                         std::ostream& out, const CheckOptions& options = {},
                         const ProblemRegistry& registry = ProblemRegistry::builtin());

// `flaxpp check`'s command line (args: FILE... [--device cpu|cuda|cuda:N] [--verbose]
// [--case-timeout SECONDS], without the program's name) over `registry`: the same options,
// report, summary line "N passed, M failed" and exit codes (0 all passed, 1 a case failed,
// 2 a file or the command line was bad), with the watchdog that ends a case stuck past twice
// its time limit. `program` names the command in usage and messages ("flaxpp check").
//
// Checking your own model against JAX: copy ProblemRegistry::builtin(), add your problems, and
// return check_main(argc, argv, registry) from main; the refs files may then name them.
int check_main(const std::vector<std::string>& args, const ProblemRegistry& registry,
               std::string_view program);
int check_main(int argc, char** argv, const ProblemRegistry& registry);

}  // namespace flaxpp::refs
