// The reference-case checker behind `flaxpp check` (refs-format.md, "`flaxpp check`"):
// tolerance semantics of refs::compare, case-level failures that never stop the run,
// file-level failures that name the file and JSON path, the threefry mode switch, and the
// printed summary and exit code of check_files.
#include <doctest/doctest.h>

#include "harness/errors.hpp"
#include "harness/temp_dir.hpp"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/core/tree.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/io/refs.hpp"

namespace {

using flaxpp::Array;
using flaxpp::Device;
using flaxpp::Shape;
using flaxpp::Tree;
using flaxpp::refs::check_document;
using flaxpp::refs::compare;
using flaxpp::refs::FileResult;
using flaxpp::refs::Json;
using flaxpp::refs::Tolerance;

using flaxpp::testing::has;
using flaxpp::testing::parse_error_of;
using flaxpp::testing::TempDir;

Json uint32_json(std::vector<std::int64_t> shape, std::vector<std::uint32_t> data) {
  return Json{{"dtype", "uint32"}, {"shape", std::move(shape)}, {"data", std::move(data)}};
}

// {"format": "flaxpp.refs/1", "cases": cases}, with versions.jax_threefry_partitionable when
// `versions` is an object.
Json document(Json cases, Json versions = nullptr) {
  Json doc{{"format", "flaxpp.refs/1"}, {"generator", "tests/io/test_check.cpp"}};
  if (!versions.is_null()) doc["versions"] = std::move(versions);
  doc["cases"] = std::move(cases);
  return doc;
}

// A random.key case: key(seed) = [0, low]; seed may be any JSON value.
Json key_case(const std::string& id, Json seed, std::uint32_t low) {
  return Json{{"id", id},
              {"problem", "random.key"},
              {"inputs", {{"seed", std::move(seed)}}},
              {"expected", uint32_json({2}, {0u, low})},
              {"rtol", 0},
              {"atol", 0}};
}

Json split_case(const std::string& id, std::vector<std::uint32_t> expected) {
  return Json{{"id", id},
              {"problem", "random.split"},
              {"inputs", {{"key", uint32_json({2}, {0u, 0u})}, {"num", 4}}},
              {"expected", uint32_json({4, 2}, std::move(expected))},
              {"rtol", 0},
              {"atol", 0}};
}

// jax.random.split(jax.random.key(0), 4), flattened, in both threefry modes.
const std::vector<std::uint32_t> kLegacySplit = {2285895361u, 1501764800u, 1518642379u,
                                                 4090693311u, 433833334u,  4221794875u,
                                                 839183663u,  3740430601u};
const std::vector<std::uint32_t> kPartitionableSplit = {1797259609u, 2579123966u, 928981903u,
                                                        3453687069u, 4146024105u, 2718843009u,
                                                        2467461003u, 3840466878u};

FileResult check(const Json& doc) {
  return check_document(doc, "mem.json", Device::cpu());
}

// Runs `bad` followed by a passing case: the first must fail with a message containing every
// one of `parts`, and the second must still run and pass.
void expect_case_fails_and_run_goes_on(Json bad, const std::vector<std::string>& parts) {
  const FileResult result =
      check(document(Json::array({std::move(bad), key_case("after", 42, 42)})));
  REQUIRE_FALSE(result.error.has_value());
  REQUIRE(result.cases.size() == 2);
  const auto& failed = result.cases[0];
  INFO("message: " << failed.message);
  CHECK_FALSE(failed.passed);
  for (const std::string& part : parts) {
    CAPTURE(part);
    CHECK(has(failed.message, part));
  }
  CHECK(result.cases[1].id == "after");
  CHECK(result.cases[1].passed);
}

// Checks a document that must fail as a whole; returns the error message.
std::string file_error_of(const Json& doc) {
  const FileResult result = check(doc);
  REQUIRE(result.error.has_value());
  CHECK(result.cases.empty());
  CHECK(has(*result.error, "mem.json"));
  return *result.error;
}

Tree f64(std::vector<double> data) {
  const auto n = static_cast<std::int64_t>(data.size());
  return Tree(Array::from_vector(data, Shape{n}));
}
Tree f32(std::vector<float> data) {
  const auto n = static_cast<std::int64_t>(data.size());
  return Tree(Array::from_vector(data, Shape{n}));
}
Tolerance tolerance(double rtol, double atol, std::optional<double> ulp = std::nullopt) {
  Tolerance t;
  t.rtol = rtol;
  t.atol = atol;
  t.ulp = ulp;
  return t;
}
// `x` moved `steps` float32 steps towards +infinity.
float ulps_up(float x, int steps) {
  for (int i = 0; i < steps; ++i)
    x = std::nextafter(x, std::numeric_limits<float>::infinity());
  return x;
}

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::nan("");

}  // namespace

// ---- a passing case ----------------------------------------------------------------------

TEST_CASE("check: a random.key case with the right key data passes") {
  const FileResult result = check(document(Json::array(
      {key_case("random.key/seed42", 42, 42), key_case("random.key/seed-1", -1, 4294967295u)})));
  REQUIRE_FALSE(result.error.has_value());
  REQUIRE(result.cases.size() == 2);
  CHECK(result.file == "mem.json");
  for (const auto& c : result.cases) {
    INFO(c.id << ": " << c.message);
    CHECK(c.passed);
    CHECK(c.message.empty());
  }
  CHECK(result.cases[0].id == "random.key/seed42");
}

TEST_CASE("check: a random.key case with wrong expected data fails naming the element") {
  const FileResult result = check(document(Json::array({key_case("wrong", 42, 43)})));
  REQUIRE(result.cases.size() == 1);
  const auto& c = result.cases[0];
  INFO(c.message);
  CHECK_FALSE(c.passed);
  CHECK(c.id == "wrong");
  CHECK(has(c.message, "[1]"));
  CHECK(has(c.message, "got 42"));
  CHECK(has(c.message, "want 43"));
}

// ---- tolerance semantics -----------------------------------------------------------------

TEST_CASE("compare: a float passes at exactly atol + rtol*|want| and fails one step beyond") {
  // want 4, bound 0.5 + 0.125*4 = 1. Every got here lies in [want/2, 2*want], so |got - want|
  // is computed exactly and one double step past 3 or 5 is a difference just over 1.
  const Tolerance tol = tolerance(0.125, 0.5);
  CHECK_FALSE(compare(f64({5.0}), f64({4.0}), tol).has_value());
  CHECK_FALSE(compare(f64({3.0}), f64({4.0}), tol).has_value());
  CHECK(compare(f64({std::nextafter(5.0, 6.0)}), f64({4.0}), tol).has_value());
  CHECK(compare(f64({std::nextafter(3.0, 2.0)}), f64({4.0}), tol).has_value());
  // rtol scales with |want|, also for a negative want.
  CHECK_FALSE(compare(f64({-5.0}), f64({-4.0}), tolerance(0.25, 0.0)).has_value());
  CHECK(compare(f64({std::nextafter(-5.0, -6.0)}), f64({-4.0}), tolerance(0.25, 0.0)).has_value());
  // atol alone, at want = 0 (no relative slack there).
  CHECK_FALSE(compare(f32({0.5f}), f32({0.0f}), tolerance(0.25, 0.5)).has_value());
  CHECK(compare(f32({0.5000001f}), f32({0.0f}), tolerance(0.25, 0.5)).has_value());
}

TEST_CASE("compare: a tolerance failure names the path, index, got/want and the max errors") {
  const Tree want{{"a", f32({1.0f})},
                  {"y", Tree(Array::from_vector(std::vector<float>{1, 2, 3, 4}, Shape{2, 2}))}};
  const Tree got{{"a", f32({1.0f})},
                 {"y", Tree(Array::from_vector(std::vector<float>{1, 2, 3.5f, 4}, Shape{2, 2}))}};
  const auto msg = compare(got, want, tolerance(0.0, 0.0));
  REQUIRE(msg.has_value());
  INFO(*msg);
  CHECK(has(*msg, "\"y\"[1,0]"));
  CHECK(has(*msg, "got 3.5"));
  CHECK(has(*msg, "want 3"));
  CHECK(has(*msg, "max abs err 0.5"));
}

TEST_CASE("compare: with ulp, floats pass within N float32 steps and fail beyond") {
  const Tolerance tol = tolerance(0.0, 0.0, 3.0);
  CHECK_FALSE(compare(f32({ulps_up(1.0f, 3)}), f32({1.0f}), tol).has_value());
  CHECK_FALSE(compare(f32({1.0f}), f32({ulps_up(1.0f, 3)}), tol).has_value());
  const auto beyond = compare(f32({ulps_up(1.0f, 4)}), f32({1.0f}), tol);
  REQUIRE(beyond.has_value());
  INFO(*beyond);
  CHECK(has(*beyond, "4 ulp away"));
  // Steps are counted across zero: -denorm_min, ±0 and +denorm_min are neighbours.
  const float tiny = std::numeric_limits<float>::denorm_min();
  CHECK_FALSE(compare(f32({-tiny}), f32({tiny}), tolerance(0.0, 0.0, 2.0)).has_value());
  CHECK(compare(f32({-tiny}), f32({tiny}), tolerance(0.0, 0.0, 1.0)).has_value());
  // Without ulp the same 3-step difference fails at zero tolerance.
  CHECK(compare(f32({ulps_up(1.0f, 3)}), f32({1.0f}), tolerance(0.0, 0.0)).has_value());
}

TEST_CASE("compare: with ulp, float64 values beyond the float32 range fail when far apart") {
  // 1e300 and 1e301 are not within one float32 step of each other under any reading: neither
  // is a float32, and they differ by a factor of ten.
  const Tolerance tol = tolerance(0.0, 0.0, 1.0);
  CHECK(compare(f64({1e301}), f64({1e300}), tol).has_value());
  CHECK(compare(f64({-1e300}), f64({-1e40}), tol).has_value());
  CHECK(compare(f64({1e39}), f64({static_cast<double>(std::numeric_limits<float>::max())}), tol)
            .has_value());
}

TEST_CASE("compare: NaN matches NaN only") {
  const Tolerance loose = tolerance(1e9, 1e9, 1e9);
  CHECK_FALSE(compare(f64({kNaN}), f64({kNaN}), tolerance(0.0, 0.0)).has_value());
  CHECK_FALSE(compare(f32({std::nanf("")}), f32({std::nanf("")}), tolerance(0.0, 0.0)).has_value());
  CHECK(compare(f64({1.0}), f64({kNaN}), loose).has_value());
  CHECK(compare(f64({kNaN}), f64({1.0}), loose).has_value());
  CHECK(compare(f64({kInf}), f64({kNaN}), loose).has_value());
}

TEST_CASE("compare: +inf and -inf match only themselves") {
  const Tolerance loose = tolerance(1e9, 1e9, 1e9);
  CHECK_FALSE(compare(f64({kInf, -kInf}), f64({kInf, -kInf}), tolerance(0.0, 0.0)).has_value());
  CHECK(compare(f64({-kInf}), f64({kInf}), loose).has_value());
  CHECK(compare(f64({kInf}), f64({-kInf}), loose).has_value());
  CHECK(compare(f64({1e300}), f64({kInf}), loose).has_value());
  CHECK(compare(f64({kInf}), f64({1e300}), loose).has_value());
  CHECK(compare(f64({kNaN}), f64({kInf}), loose).has_value());
}

TEST_CASE("compare: integer and bool data match exactly whatever the tolerance") {
  const Tolerance loose = tolerance(1.0, 100.0, 1e6);
  auto i32 = [](std::vector<std::int32_t> v) { return Tree(Array::from_vector(v, Shape{2})); };
  auto u32 = [](std::vector<std::uint32_t> v) { return Tree(Array::from_vector(v, Shape{2})); };
  auto bools = [](bool a, bool b) {
    const bool data[2] = {a, b};
    return Tree(Array::from_vector(std::span<const bool>(data), Shape{2}));
  };
  CHECK_FALSE(compare(i32({-3, 7}), i32({-3, 7}), tolerance(0.0, 0.0)).has_value());
  CHECK(compare(i32({-3, 8}), i32({-3, 7}), loose).has_value());
  CHECK_FALSE(
      compare(u32({0u, 4294967295u}), u32({0u, 4294967295u}), tolerance(0.0, 0.0)).has_value());
  CHECK(compare(u32({0u, 4294967294u}), u32({0u, 4294967295u}), loose).has_value());
  CHECK_FALSE(compare(bools(true, false), bools(true, false), tolerance(0.0, 0.0)).has_value());
  CHECK(compare(bools(true, true), bools(true, false), loose).has_value());
}

TEST_CASE("compare: a dtype mismatch fails even when the values are equal") {
  const auto msg = compare(f32({1.0f, 2.0f}), f64({1.0, 2.0}), tolerance(1.0, 1.0));
  REQUIRE(msg.has_value());
  INFO(*msg);
  CHECK(has(*msg, "dtype float32, want float64"));
  CHECK(compare(Tree(Array::from_vector(std::vector<std::int32_t>{1}, Shape{1})),
                Tree(Array::from_vector(std::vector<std::uint32_t>{1u}, Shape{1})),
                tolerance(1.0, 1.0))
            .has_value());
}

TEST_CASE("compare: a shape mismatch fails even with the same data") {
  const std::vector<float> six = {1, 2, 3, 4, 5, 6};
  const Tree a23(Array::from_vector(six, Shape{2, 3}));
  const Tree a32(Array::from_vector(six, Shape{3, 2}));
  const Tree a6(Array::from_vector(six, Shape{6}));
  const auto msg = compare(a23, a32, tolerance(1.0, 1.0));
  REQUIRE(msg.has_value());
  INFO(*msg);
  CHECK(has(*msg, "shape [2,3], want [3,2]"));
  CHECK(compare(a6, a23, tolerance(1.0, 1.0)).has_value());
  CHECK(compare(Tree(Array::scalar(1.0f)), f32({1.0f}), tolerance(1.0, 1.0)).has_value());
}

TEST_CASE("compare: different tree path sets fail naming the missing and unexpected paths") {
  const Tree want{{"a", f32({1.0f})}, {"b", Tree{{"d", f32({2.0f})}, {"e", f32({3.0f})}}}};
  const Tree got{{"a", f32({1.0f})}, {"b", Tree{{"c", f32({2.0f})}, {"e", f32({3.0f})}}}};
  const auto msg = compare(got, want, tolerance(1.0, 1.0));
  REQUIRE(msg.has_value());
  INFO(*msg);
  CHECK(has(*msg, "missing [\"b/d\"]"));
  CHECK(has(*msg, "unexpected [\"b/c\"]"));
  // A leaf where a dict is expected: the root path is unexpected.
  const auto leaf_vs_dict = compare(f32({1.0f}), Tree{{"a", f32({1.0f})}}, tolerance(1.0, 1.0));
  REQUIRE(leaf_vs_dict.has_value());
  CHECK(has(*leaf_vs_dict, "missing [\"a\"]"));
  CHECK(has(*leaf_vs_dict, "unexpected [(root)]"));
  // Same paths, keys inserted in a different order: they match.
  const Tree reordered{{"b", Tree{{"e", f32({3.0f})}, {"d", f32({2.0f})}}}, {"a", f32({1.0f})}};
  CHECK_FALSE(compare(reordered, want, tolerance(0.0, 0.0)).has_value());
}

// ---- case-level failures: reported, and the run goes on ----------------------------------

TEST_CASE("check: an unknown problem fails the case listing the known problems") {
  Json bad = key_case("typo", 1, 1);
  bad["problem"] = "random.kee";
  expect_case_fails_and_run_goes_on(bad, {"$.cases[0].problem", "unknown problem \"random.kee\"",
                                          "random.key", "random.split", "initializer"});
}

TEST_CASE("check: a missing input fails the case naming it") {
  Json bad = key_case("no-seed", 1, 1);
  bad["inputs"] = Json::object();
  expect_case_fails_and_run_goes_on(bad, {"$.cases[0].inputs.seed", "missing"});
}

TEST_CASE("check: key data of the wrong dtype fails the case") {
  Json bad = split_case("int-key", kPartitionableSplit);
  bad["inputs"]["key"]["dtype"] = "int32";
  expect_case_fails_and_run_goes_on(bad, {"$.cases[0].inputs.key", "uint32[2]", "int32"});
}

TEST_CASE("check: an input whose data length differs from its shape fails the case") {
  Json bad = split_case("short-key", kPartitionableSplit);
  bad["inputs"]["key"]["data"] = Json::array({0, 0, 0});
  expect_case_fails_and_run_goes_on(bad, {"$.cases[0].inputs.key.data", "3 values", "needs 2"});
}

TEST_CASE("check: a non-integral float seed (3.5) fails and an integral one (3.0) passes") {
  const FileResult result = check(document(Json::array(
      {key_case("seed3.5", 3.5, 3), key_case("seed3.0", 3.0, 3), key_case("seed3", 3, 3)})));
  REQUIRE(result.cases.size() == 3);
  INFO(result.cases[0].message);
  CHECK_FALSE(result.cases[0].passed);
  CHECK(has(result.cases[0].message, "$.cases[0].inputs.seed"));
  CHECK(has(result.cases[0].message, "3.5"));
  CHECK(result.cases[1].passed);
  CHECK(result.cases[2].passed);
}

TEST_CASE("check: a repeated case id fails that case and the run goes on") {
  const FileResult result = check(document(
      Json::array({key_case("dup", 1, 1), key_case("dup", 2, 2), key_case("other", 3, 3)})));
  REQUIRE(result.cases.size() == 3);
  CHECK(result.cases[0].passed);
  INFO(result.cases[1].message);
  CHECK_FALSE(result.cases[1].passed);
  CHECK(result.cases[1].id == "dup");
  CHECK(has(result.cases[1].message, "$.cases[1].id"));
  CHECK(has(result.cases[1].message, "repeats"));
  CHECK(result.cases[2].passed);
}

TEST_CASE("check: an initializer given an argument it does not accept fails the case") {
  auto init_case = [](const std::string& id, const std::string& name, Json args) {
    Json c{{"id", id},
           {"problem", "initializer"},
           {"inputs", {{"name", name}, {"key", uint32_json({2}, {0u, 0u})}, {"shape", {2}}}},
           {"expected", {{"dtype", "float32"}, {"shape", {2}}, {"data", {0.0, 0.0}}}}};
    if (!args.is_null()) c["inputs"]["args"] = std::move(args);
    return c;
  };
  // The control: zeros with no arguments passes.
  const FileResult ok = check(document(Json::array({init_case("zeros", "zeros", nullptr)})));
  REQUIRE(ok.cases.size() == 1);
  INFO(ok.cases[0].message);
  CHECK(ok.cases[0].passed);

  expect_case_fails_and_run_goes_on(
      init_case("normal-scale", "normal", {{"scale", 2.0}}),
      {"$.cases[0].inputs.args.scale", "does not accept \"scale\"", "stddev"});
  expect_case_fails_and_run_goes_on(init_case("zeros-value", "zeros", {{"value", 1.0}}),
                                    {"does not accept \"value\"", "takes no arguments"});
}

TEST_CASE("check: a malformed expected value fails the case") {
  Json short_data = key_case("short-expected", 1, 1);
  short_data["expected"]["data"] = Json::array({0});
  expect_case_fails_and_run_goes_on(short_data,
                                    {"$.cases[0].expected.data", "1 values", "needs 2"});

  Json bad_dtype = key_case("bad-dtype", 1, 1);
  bad_dtype["expected"]["dtype"] = "uint64";
  expect_case_fails_and_run_goes_on(bad_dtype, {"$.cases[0].expected.dtype", "uint64"});

  Json missing = key_case("no-expected", 1, 1);
  missing.erase("expected");
  expect_case_fails_and_run_goes_on(missing, {"$.cases[0].expected", "missing"});

  Json wrong_tree = key_case("tree-expected", 1, 1);
  wrong_tree["expected"] = Json{{"k", uint32_json({2}, {0u, 1u})}};
  expect_case_fails_and_run_goes_on(wrong_tree, {"tree paths differ", "missing [\"k\"]"});
}

TEST_CASE(
    "check: a malformed case (not an object, no id, negative rtol) fails and the run goes on") {
  expect_case_fails_and_run_goes_on(Json(7), {"$.cases[0]", "case object"});

  Json no_id = key_case("x", 1, 1);
  no_id.erase("id");
  const FileResult result = check(document(Json::array({no_id})));
  REQUIRE(result.cases.size() == 1);
  CHECK_FALSE(result.cases[0].passed);
  CHECK(result.cases[0].id == "$.cases[0]");  // a case without an id is named by its path
  CHECK(has(result.cases[0].message, "$.cases[0].id"));

  Json negative = key_case("negative-rtol", 1, 1);
  negative["rtol"] = -1e-5;
  expect_case_fails_and_run_goes_on(negative, {"$.cases[0].rtol", ">= 0"});
}

// ---- file-level failures -----------------------------------------------------------------

TEST_CASE("check: a document that is not an object fails as a whole") {
  const std::string msg = file_error_of(Json::array({key_case("a", 1, 1)}));
  INFO(msg);
  CHECK(has(msg, "$:"));
  CHECK(has(msg, "an array of 1 elements"));
}

TEST_CASE("check: a document without format fails as a whole naming $.format") {
  Json doc = document(Json::array({key_case("a", 1, 1)}));
  doc.erase("format");
  const std::string msg = file_error_of(doc);
  INFO(msg);
  CHECK(has(msg, "$.format"));
  CHECK(has(msg, "flaxpp.refs/1"));
}

TEST_CASE("check: a document with another format string fails as a whole") {
  Json doc = document(Json::array({key_case("a", 1, 1)}));
  doc["format"] = "flaxpp.refs/2";
  const std::string msg = file_error_of(doc);
  INFO(msg);
  CHECK(has(msg, "$.format"));
  CHECK(has(msg, "\"flaxpp.refs/1\""));
  CHECK(has(msg, "\"flaxpp.refs/2\""));
}

TEST_CASE("check: cases that are not a list, or are absent, fail the document as a whole") {
  const std::string not_list = file_error_of(document(key_case("a", 1, 1)));
  INFO(not_list);
  CHECK(has(not_list, "$.cases"));
  CHECK(has(not_list, "an object"));

  Json absent = document(Json::array());
  absent.erase("cases");
  const std::string missing = file_error_of(absent);
  INFO(missing);
  CHECK(has(missing, "$.cases"));
}

TEST_CASE("check: versions.jax_threefry_partitionable must be a bool") {
  const std::string msg = file_error_of(
      document(Json::array({key_case("a", 1, 1)}), Json{{"jax_threefry_partitionable", "false"}}));
  INFO(msg);
  CHECK(has(msg, "$.versions.jax_threefry_partitionable"));
  CHECK(has(msg, "the string \"false\""));
}

TEST_CASE("check: an empty case list is a valid document with nothing to run") {
  const FileResult result = check(document(Json::array()));
  CHECK_FALSE(result.error.has_value());
  CHECK(result.cases.empty());
}

// ---- threefry mode -----------------------------------------------------------------------

TEST_CASE("check: versions.jax_threefry_partitionable false selects legacy threefry") {
  auto run = [](const Json& versions) {
    const FileResult result =
        check(document(Json::array({split_case("legacy", kLegacySplit),
                                    split_case("partitionable", kPartitionableSplit)}),
                       versions));
    REQUIRE_FALSE(result.error.has_value());
    REQUIRE(result.cases.size() == 2);
    return std::pair{result.cases[0].passed, result.cases[1].passed};
  };
  SUBCASE("false: legacy") {
    CHECK(run(Json{{"jax", "0.10.2"}, {"jax_threefry_partitionable", false}}) ==
          std::pair{true, false});
  }
  SUBCASE("true: partitionable") {
    CHECK(run(Json{{"jax_threefry_partitionable", true}}) == std::pair{false, true});
  }
  SUBCASE("absent from versions: partitionable") {
    CHECK(run(Json{{"jax", "0.10.2"}}) == std::pair{false, true});
  }
  SUBCASE("no versions at all: partitionable") {
    CHECK(run(nullptr) == std::pair{false, true});
  }
}

// ---- check_files: output and exit code ---------------------------------------------------

namespace {
std::string dump(const Json& doc) {
  return doc.dump(1);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}
}  // namespace

TEST_CASE("check_files: all cases passing prints 'N passed, 0 failed' and exits 0") {
  const TempDir dir;
  const std::string a = dir.write("a.json", dump(document(Json::array({key_case("k1", 1, 1)}))));
  const std::string b = dir.write(
      "b.json",
      dump(document(Json::array({key_case("k2", 2, 2), split_case("s", kPartitionableSplit)}))));
  std::ostringstream out;
  const auto summary = flaxpp::refs::check_files({a, b}, Device::cpu(), false, out);
  INFO(out.str());
  CHECK(summary.passed == 3);
  CHECK(summary.failed == 0);
  CHECK_FALSE(summary.file_errors);
  CHECK(summary.exit_code() == 0);
  CHECK(out.str() == "3 passed, 0 failed\n");
}

TEST_CASE("check_files: a failing case is printed with its id and reason and exits 1") {
  const TempDir dir;
  const std::string file = dir.write(
      "mixed.json", dump(document(Json::array({key_case("good", 1, 1), key_case("bad/one", 2, 3),
                                               key_case("good2", 4, 4)}))));
  std::ostringstream out;
  const auto summary = flaxpp::refs::check_files({file}, Device::cpu(), false, out);
  const std::string text = out.str();
  INFO(text);
  CHECK(summary.passed == 2);
  CHECK(summary.failed == 1);
  CHECK(summary.exit_code() == 1);
  CHECK(has(text, "bad/one"));
  CHECK(has(text, file));
  CHECK(has(text, "want 3"));
  CHECK_FALSE(has(text, "good2"));  // passing cases are listed only with verbose
  const auto lines = lines_of(text);
  REQUIRE_FALSE(lines.empty());
  CHECK(lines.back() == "2 passed, 1 failed");
  CHECK(text.back() == '\n');
}

TEST_CASE("check_files: verbose also lists the passing cases") {
  const TempDir dir;
  const std::string file =
      dir.write("v.json", dump(document(Json::array({key_case("shown/one", 1, 1)}))));
  std::ostringstream out;
  const auto summary = flaxpp::refs::check_files({file}, Device::cpu(), true, out);
  INFO(out.str());
  CHECK(summary.exit_code() == 0);
  CHECK(has(out.str(), "shown/one"));
  CHECK(lines_of(out.str()).back() == "1 passed, 0 failed");
}

TEST_CASE("check_files: malformed files exit 2 while the other files' cases still count") {
  const TempDir dir;
  const std::string good = dir.write(
      "good.json", dump(document(Json::array({key_case("g1", 1, 1), key_case("g2", 2, 2)}))));
  const std::string failing =
      dir.write("failing.json", dump(document(Json::array({key_case("f1", 1, 2)}))));
  const std::string truncated =
      dir.write("truncated.json", "{\"format\": \"flaxpp.refs/1\", \"cases\": [");
  const std::string not_refs = dir.write("not_refs.json", R"({"cases": []})");
  const std::string missing = dir.write("x.json", "{}") + ".absent";
  std::ostringstream out;
  const auto summary = flaxpp::refs::check_files({truncated, good, not_refs, failing, missing},
                                                 Device::cpu(), false, out);
  const std::string text = out.str();
  INFO(text);
  CHECK(summary.file_errors);
  CHECK(summary.passed == 2);
  CHECK(summary.failed == 1);
  CHECK(summary.exit_code() == 2);
  CHECK(has(text, truncated + ":1:"));
  CHECK(has(text, not_refs));
  CHECK(has(text, "$.format"));
  CHECK(has(text, missing));
  CHECK(has(text, "f1"));
  CHECK(lines_of(text).back() == "2 passed, 1 failed");
}

TEST_CASE("check_file: a truncated JSON file is a file error naming file:line:col") {
  const TempDir dir;
  const std::string file =
      dir.write("cut.json", "{\n\"format\": \"flaxpp.refs/1\",\n\"cases\": [{\"id\": \"a\"");
  const FileResult result = flaxpp::refs::check_file(file, Device::cpu());
  REQUIRE(result.error.has_value());
  INFO(*result.error);
  CHECK(result.cases.empty());
  CHECK(result.file == file);
  CHECK(result.error->rfind(file + ":3:", 0) == 0);
}

TEST_CASE("check_file: a file that is valid JSON but not a refs document names its JSON path") {
  const TempDir dir;
  const std::string file = dir.write("list.json", "[1, 2, 3]");
  const FileResult result = flaxpp::refs::check_file(file, Device::cpu());
  REQUIRE(result.error.has_value());
  INFO(*result.error);
  CHECK(has(*result.error, file + ": $:"));
}
