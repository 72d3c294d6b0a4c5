// flaxpp check against cases whose sizes or run time blow up (issue 15): each is refused up
// front, naming the input, when it needs more host memory than is available, or stopped at its
// time limit; the cases after it still run.
#include <doctest/doctest.h>

#include "harness/errors.hpp"
#include "harness/host_memory_limit.hpp"

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>

#include "flaxpp/io/refs.hpp"

using namespace flaxpp;
using flaxpp::testing::has;
using flaxpp::testing::HostMemoryLimit;
using refs::Json;

namespace {

Json key_json() {
  return Json{{"dtype", "uint32"}, {"shape", {2}}, {"data", {0, 0}}};
}

Json case_json(const std::string& id, const std::string& problem, Json inputs) {
  return Json{{"id", id},
              {"problem", problem},
              {"inputs", std::move(inputs)},
              {"expected", Json{{"dtype", "float32"}, {"shape", {1}}, {"data", {0.0}}}}};
}

// A train_mlp case of `steps` steps on 4 rows, with the given batch size and layer sizes.
Json train_case(const std::string& id, std::int64_t steps, std::int64_t batch_size,
                Json features = Json::array({3})) {
  return case_json(id, "train_mlp",
                   Json{{"seed", 0},
                        {"x", Json{{"dtype", "float32"},
                                   {"shape", {4, 2}},
                                   {"data", {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}}}},
                        {"y", Json{{"dtype", "int32"}, {"shape", {4}}, {"data", {0, 1, 2, 0}}}},
                        {"features", std::move(features)},
                        {"optimizer", Json{{"name", "sgd"}, {"learning_rate", 0.1}}},
                        {"policy", "none"},
                        {"steps", steps},
                        {"batch_size", batch_size}});
}

// random.key(0): a case that passes, run after the one under test.
Json passing_case() {
  return Json{{"id", "after"},
              {"problem", "random.key"},
              {"inputs", {{"seed", 0}}},
              {"expected", Json{{"dtype", "uint32"}, {"shape", {2}}, {"data", {0, 0}}}}};
}

// The message of `bad`, which must fail while the case after it passes.
std::string failure_of(Json bad, const refs::CheckOptions& options = {}) {
  const Json doc{{"format", "flaxpp.refs/1"},
                 {"cases", Json::array({std::move(bad), passing_case()})}};
  const refs::FileResult result = refs::check_document(doc, "mem.json", Device::cpu(),
                                                       refs::ProblemRegistry::builtin(), options);
  REQUIRE(result.cases.size() == 2);
  CHECK_FALSE(result.cases[0].passed);
  CHECK(result.cases[1].passed);
  return result.cases[0].message;
}

}  // namespace

TEST_CASE(
    "check: sizes that need more host memory than is available are refused naming the "
    "input, before anything is allocated") {
  const HostMemoryLimit limit(std::uint64_t{1} << 30);  // 1 GB, whatever the machine has
  const Json x{{"dtype", "float32"}, {"shape", {2, 3}}, {"data", {1, 2, 3, 4, 5, 6}}};
  // Issue 15: each of these took 8-12 GB before failing, or bad_alloc.
  CHECK(has(
      failure_of(case_json("split", "random.split", {{"key", key_json()}, {"num", 1000000000}})),
      "$.cases[0].inputs.num: splitting a key into 1000000000 keys needs 48.0 GB of host "
      "memory, but 1.07 GB are available; make the case smaller"));
  CHECK(has(failure_of(case_json("init", "mlp_init",
                                 {{"seed", 0}, {"x", x}, {"features", {1000000000, 2}}})),
            "$.cases[0].inputs.features: an MLP of 6000000002 parameters on 2 rows of 3 features "
            "needs"));
  CHECK(has(failure_of(case_json("init12", "mlp_init",
                                 {{"seed", 0}, {"x", x}, {"features", {1000000000000, 2}}})),
            "an MLP of 6000000000002 parameters"));
  CHECK(has(failure_of(train_case("batch", 1, std::int64_t{1} << 62)),
            "$.cases[0].inputs.batch_size: a batch of 4611686018427387904 rows of 2 features"));
  CHECK(has(failure_of(train_case("steps", 1000000000000, 2)),
            "$.cases[0].inputs.steps: keeping the loss of each of 1000000000000 steps needs 4.00 "
            "TB of host memory"));
  CHECK(has(failure_of(case_json("layers", "nnx_mlp_init",
                                 {{"seed", 0}, {"features", 100000}, {"num_layers", 1000}})),
            "$.cases[0].inputs.num_layers: 1000 Linear layers of 100000 features needs"));
  CHECK(has(failure_of(case_json("bits", "random.bits",
                                 {{"key", key_json()}, {"shape", {1000000, 1000}}})),
            "$.cases[0].inputs.shape: a shape of 1e+09 elements needs 16.0 GB"));
}

TEST_CASE("check: a case that runs past its time limit fails naming the limit; the next runs") {
  refs::CheckOptions options;
  options.case_timeout = std::chrono::seconds(1);
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = failure_of(train_case("runaway", 100000000, 2), options);
  CHECK(has(msg, "$.cases[0]: stopped after the time limit of 1 s per case"));
  CHECK(has(msg, "flaxpp check --case-timeout SECONDS, 0 for none"));
  // Stopped between two steps, long before its 10^8 steps.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
}

TEST_CASE("check: an expected record nested 100k levels deep fails the case, not the stack") {
  std::ifstream in(std::string(FLAXPP_SOURCE_DIR) +
                   "/tests/fuzz/corpus/refs/saved_residuals_checkpoint_dot_policy.json");
  Json c = Json::parse(in)["cases"][0];
  c["expected"] = Json::parse("[" + std::string(100000, '[') + std::string(100000, ']') + "]");
  CHECK(has(failure_of(std::move(c)),
            "$.cases[0].expected[0]: the record is nested more than 256 levels deep"));
}

TEST_CASE("check: an exception that is not a flaxpp::Error is marked an internal error") {
  refs::ProblemRegistry registry;
  registry.add("throws", [](const refs::Inputs&, const refs::CaseContext&) -> refs::Outcome {
    throw std::out_of_range("vector::at");
  });
  registry.add("refuses", [](const refs::Inputs& in, const refs::CaseContext&) -> refs::Outcome {
    throw refs::InputError(in.path() + ": refused");
  });
  const Json doc{
      {"format", "flaxpp.refs/1"},
      {"cases",
       {Json{{"id", "a"}, {"problem", "throws"}, {"inputs", Json::object()}, {"expected", 0}},
        Json{{"id", "b"}, {"problem", "refuses"}, {"inputs", Json::object()}, {"expected", 0}}}}};
  const refs::FileResult result = refs::check_document(doc, "mem.json", Device::cpu(), registry);
  REQUIRE(result.cases.size() == 2);
  CHECK(result.cases[0].internal_error);
  CHECK(result.cases[0].message ==
        "$.cases[0]: internal error (vector::at); this is a bug in flaxpp: please report it with "
        "this case");
  CHECK_FALSE(result.cases[1].internal_error);
  CHECK(result.cases[1].message == "$.cases[1].inputs: refused");
}

TEST_CASE("check_files: hooks hear each case start and end; output is printed as cases end") {
  const std::string file = std::string(FLAXPP_SOURCE_DIR) + "/tests/refs/random_legacy.json";
  std::vector<std::string> started;
  int done = 0;
  refs::CheckOptions options;
  options.on_case_start = [&](const std::string& label) { started.push_back(label); };
  options.on_case_done = [&](const refs::CaseResult&) { ++done; };
  std::ostringstream out;
  const refs::CheckSummary summary = refs::check_files({file}, Device::cpu(), false, out, options);
  CHECK(summary.exit_code() == 0);
  REQUIRE_FALSE(started.empty());
  CHECK(started.front() == file + ": $.cases[0]");
  CHECK(done == static_cast<int>(started.size()));
  CHECK(summary.passed == done);
}
