// Arrays and trees as JSON in the flaxpp.refs/1 encoding (refs-format.md, "File"): reading
// rounds to the declared dtype, writing round-trips, and every malformed input is a ParseError
// that names its JSON path.
#include <doctest/doctest.h>

#include "harness/errors.hpp"
#include "harness/temp_dir.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/tree.hpp"
#include "flaxpp/io/json.hpp"

namespace {

using flaxpp::Array;
using flaxpp::DType;
using flaxpp::ParseError;
using flaxpp::Shape;
using flaxpp::Tree;
using flaxpp::io::array_from_json;
using flaxpp::io::array_to_json;
using flaxpp::io::Json;
using flaxpp::io::read_json_file;
using flaxpp::io::tree_from_json;
using flaxpp::io::tree_to_json;

using flaxpp::testing::has;
using flaxpp::testing::parse_error_of;
using flaxpp::testing::TempDir;

// The ParseError's message of reading `json` as an array found at `path`.
std::string array_error(const char* json, const std::string& path = "$") {
  return parse_error_of([&] { array_from_json(Json::parse(json), path); });
}

// Checks that `message` has each of `parts`.
void check_has_all(const std::string& message, std::initializer_list<std::string> parts) {
  INFO(message);
  for (const std::string& part : parts)
    CHECK(has(message, part));
}

// A float32 or float64 array's values widened to double.
std::vector<double> as_doubles(const Array& a) {
  if (a.dtype() == DType::f64) return a.to_vector<double>();
  const std::vector<float> v = a.to_vector<float>();
  return {v.begin(), v.end()};
}

Array f32(const std::vector<float>& data, Shape shape) {
  return Array::from_vector(data, std::move(shape));
}

}  // namespace

TEST_CASE("array_from_json: float32 data is rounded to float32 on read") {
  const Array a = array_from_json(
      Json::parse(R"({"dtype": "float32", "shape": [4], "data": [0.1, -2.5, 1e-3, 16777217]})"));
  CHECK(a.dtype() == DType::f32);
  CHECK(a.shape() == Shape{4});
  const std::vector<float> v = a.to_vector<float>();
  CHECK(v[0] == 0.1f);
  CHECK(v[1] == -2.5f);
  CHECK(v[2] == 1e-3f);
  CHECK(v[3] == 16777216.0f);  // 2^24 + 1 is not a float32; it rounds to even
}

TEST_CASE("array_from_json: float64 data keeps double precision") {
  const Array a =
      array_from_json(Json::parse(R"({"dtype": "float64", "shape": [2], "data": [0.1, 1e-300]})"));
  CHECK(a.dtype() == DType::f64);
  const std::vector<double> v = a.to_vector<double>();
  CHECK(v[0] == 0.1);
  CHECK(v[0] != static_cast<double>(0.1f));
  CHECK(v[1] == 1e-300);
}

TEST_CASE("array_from_json: int32 data is exact over the full range and fails outside it") {
  const Array a = array_from_json(
      Json::parse(R"({"dtype": "int32", "shape": [3], "data": [-2147483648, 0, 2147483647]})"));
  CHECK(a.dtype() == DType::i32);
  CHECK(a.to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min(), 0,
                                  std::numeric_limits<std::int32_t>::max()});

  check_has_all(array_error(R"({"dtype": "int32", "shape": [2], "data": [1, 2147483648]})", "$.x"),
                {"$.x.data[1]", "[-2147483648, 2147483647]", "2147483648"});

  const std::string too_small =
      array_error(R"({"dtype": "int32", "shape": [1], "data": [-2147483649]})");
  CHECK(has(too_small, "$.data[0]"));
}

TEST_CASE("array_from_json: a negative uint32 datum is an error naming its path") {
  check_has_all(
      array_error(R"({"dtype": "uint32", "shape": [2], "data": [7, -1]})", "$.cases[0].inputs.key"),
      {"$.cases[0].inputs.key.data[1]", "[0, 4294967295]", "-1"});
}

TEST_CASE("array_from_json: uint32 data is exact up to 2^32-1 and 2^32 fails") {
  const Array a =
      array_from_json(Json::parse(R"({"dtype": "uint32", "shape": [2], "data": [0, 4294967295]})"));
  CHECK(a.dtype() == DType::u32);
  CHECK(a.to_vector<std::uint32_t>() == std::vector<std::uint32_t>{0u, 4294967295u});
  const std::string msg = array_error(R"({"dtype": "uint32", "shape": [1], "data": [4294967296]})");
  CHECK(has(msg, "$.data[0]"));
}

TEST_CASE("array_from_json: an integer dtype rejects a non-integral number") {
  const std::string msg = array_error(R"({"dtype": "int32", "shape": [2], "data": [1, 1.5]})");
  INFO(msg);
  CHECK(has(msg, "$.data[1]"));
  CHECK(has(msg, "1.5"));
}

TEST_CASE("array_from_json: bool data is true/false and nothing else") {
  const Array a = array_from_json(
      Json::parse(R"({"dtype": "bool", "shape": [3], "data": [true, false, true]})"));
  CHECK(a.dtype() == DType::bool_);
  CHECK(a.to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(array_to_json(a) ==
        Json::parse(R"({"dtype": "bool", "shape": [3], "data": [true, false, true]})"));

  const std::string msg = array_error(R"({"dtype": "bool", "shape": [2], "data": [true, 1]})");
  INFO(msg);
  CHECK(has(msg, "$.data[1]"));
  CHECK(has(msg, "true or false"));
}

TEST_CASE(
    "array_from_json: the strings NaN, Infinity and -Infinity are read as non-finite floats") {
  for (const char* dtype : {"float32", "float64"}) {
    CAPTURE(dtype);
    Json j = Json::parse(R"({"shape": [4], "data": ["NaN", "Infinity", "-Infinity", 1.5]})");
    j["dtype"] = dtype;
    const std::vector<double> v = as_doubles(array_from_json(j));
    CHECK(std::isnan(v[0]));
    CHECK(v[1] == std::numeric_limits<double>::infinity());
    CHECK(v[2] == -std::numeric_limits<double>::infinity());
    CHECK(v[3] == 1.5);
  }
}

TEST_CASE("array_from_json: other strings in float data fail listing the accepted spellings") {
  const std::string msg =
      array_error(R"({"dtype": "float32", "shape": [2], "data": [0.5, "nan"]})");
  INFO(msg);
  CHECK(has(msg, "$.data[1]"));
  CHECK(has(msg, "\"NaN\""));
  CHECK(has(msg, "\"Infinity\""));
  CHECK(has(msg, "\"-Infinity\""));
}

TEST_CASE("array_to_json: non-finite floats are written as the strings NaN, Infinity, -Infinity") {
  const float inf = std::numeric_limits<float>::infinity();
  const Json j32 = array_to_json(f32({std::nanf(""), inf, -inf, 0.5f}, Shape{2, 2}));
  CHECK(j32 == Json::parse(R"({"dtype": "float32", "shape": [2, 2],
                               "data": ["NaN", "Infinity", "-Infinity", 0.5]})"));
  const double dinf = std::numeric_limits<double>::infinity();
  const Json j64 =
      array_to_json(Array::from_vector(std::vector<double>{-dinf, std::nan(""), dinf}, Shape{3}));
  CHECK(j64 == Json::parse(R"({"dtype": "float64", "shape": [3],
                               "data": ["-Infinity", "NaN", "Infinity"]})"));
  // The text is valid JSON (no bare NaN token) and reads back to the same values.
  const Array back = array_from_json(Json::parse(j32.dump()));
  const std::vector<float> v = back.to_vector<float>();
  CHECK(std::isnan(v[0]));
  CHECK(v[1] == inf);
  CHECK(v[2] == -inf);
  CHECK(v[3] == 0.5f);
}

TEST_CASE("array_to_json: every refs dtype round-trips bit for bit through JSON text") {
  const std::vector<float> floats = {0.1f,
                                     -1.0f / 3.0f,
                                     std::numeric_limits<float>::max(),
                                     std::numeric_limits<float>::min(),
                                     std::numeric_limits<float>::denorm_min(),
                                     -0.0f};
  const std::vector<double> doubles = {0.1, 1.0 / 3.0, std::numeric_limits<double>::max(),
                                       std::numeric_limits<double>::denorm_min()};
  const std::vector<std::int32_t> ints = {std::numeric_limits<std::int32_t>::min(), -1, 0,
                                          std::numeric_limits<std::int32_t>::max()};
  const std::vector<std::uint32_t> uints = {0u, 1u, 2147483648u, 4294967295u};
  auto through_text = [](const Array& a) {
    return array_from_json(Json::parse(array_to_json(a).dump()));
  };

  const Array f = through_text(f32(floats, Shape{2, 3}));
  CHECK(f.dtype() == DType::f32);
  CHECK(f.shape() == Shape{2, 3});
  const std::vector<float> fv = f.to_vector<float>();
  for (std::size_t i = 0; i < floats.size(); ++i) {
    CAPTURE(i);
    CHECK(std::bit_cast<std::uint32_t>(fv[i]) == std::bit_cast<std::uint32_t>(floats[i]));
  }
  CHECK(through_text(Array::from_vector(doubles, Shape{4})).to_vector<double>() == doubles);
  CHECK(through_text(Array::from_vector(ints, Shape{4})).to_vector<std::int32_t>() == ints);
  CHECK(through_text(Array::from_vector(uints, Shape{2, 2})).to_vector<std::uint32_t>() == uints);
}

TEST_CASE("array_from_json: a 0-d array has shape [] and exactly one datum") {
  const Array a =
      array_from_json(Json::parse(R"({"dtype": "float32", "shape": [], "data": [2.5]})"));
  CHECK(a.rank() == 0);
  CHECK(a.size() == 1);
  CHECK(a.to_vector<float>() == std::vector<float>{2.5f});
  CHECK(array_to_json(a) == Json::parse(R"({"dtype": "float32", "shape": [], "data": [2.5]})"));

  const std::string msg = parse_error_of(
      [] { array_from_json(Json::parse(R"({"dtype": "float32", "shape": [], "data": []})")); });
  INFO(msg);
  CHECK(has(msg, "$.data"));
  CHECK(has(msg, "has 0 values"));
  CHECK(has(msg, "needs 1"));
}

TEST_CASE("array_from_json: an empty array (shape [0] or [2,0,3]) has no data") {
  const Array a = array_from_json(Json::parse(R"({"dtype": "float32", "shape": [0], "data": []})"));
  CHECK(a.shape() == Shape{0});
  CHECK(a.size() == 0);
  CHECK(array_to_json(a) == Json::parse(R"({"dtype": "float32", "shape": [0], "data": []})"));
  const Array b =
      array_from_json(Json::parse(R"({"dtype": "int32", "shape": [2, 0, 3], "data": []})"));
  CHECK(b.shape() == Shape{2, 0, 3});
  CHECK(b.size() == 0);
  CHECK(array_to_json(b) == Json::parse(R"({"dtype": "int32", "shape": [2, 0, 3], "data": []})"));
}

TEST_CASE(
    "array_from_json: data length unequal to the shape's product names the path and both counts") {
  const std::string msg = parse_error_of([] {
    array_from_json(
        Json::parse(R"({"dtype": "float32", "shape": [2, 3], "data": [1, 2, 3, 4, 5]})"),
        "$.cases[3].expected");
  });
  INFO(msg);
  CHECK(has(msg, "$.cases[3].expected.data"));
  CHECK(has(msg, "5 values"));
  CHECK(has(msg, "needs 6"));
  CHECK(has(msg, "[2,3]"));
}

TEST_CASE(
    "array_from_json: a shape whose element count overflows int64 is a ParseError naming $.shape") {
  // The header's contract: readers throw ParseError naming the JSON path.
  const Json j =
      Json::parse(R"({"dtype": "float32", "shape": [4294967296, 4294967296], "data": []})");
  CHECK_THROWS_AS(array_from_json(j, "$.x"), ParseError);
  std::string msg;
  try {
    array_from_json(j, "$.x");
  } catch (const flaxpp::Error& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK(has(msg, "$.x.shape"));
  CHECK(has(msg, "overflows"));
}

TEST_CASE("array_from_json: an unknown dtype fails listing the accepted names") {
  const std::string msg = array_error(R"({"dtype": "float8", "shape": [1], "data": [1]})", "$.w");
  INFO(msg);
  CHECK(has(msg, "$.w.dtype"));
  CHECK(has(msg, "\"float8\""));
  for (const char* name : {"float32", "float64", "int32", "uint32", "bool"}) {
    CAPTURE(name);
    CHECK(has(msg, name));
  }
}

TEST_CASE("array_from_json: bfloat16 and float16 are dtypes but not refs-format dtypes") {
  for (const char* dtype : {"bfloat16", "float16"}) {
    CAPTURE(dtype);
    Json j = Json::parse(R"({"shape": [1], "data": [1]})");
    j["dtype"] = dtype;
    const std::string msg = parse_error_of([&] { array_from_json(j); });
    INFO(msg);
    CHECK(has(msg, "$.dtype"));
    CHECK(has(msg, "not a refs-format dtype"));
  }
}

TEST_CASE("array_from_json: a missing dtype, shape or data key is named") {
  for (const char* key : {"dtype", "shape", "data"}) {
    CAPTURE(key);
    Json j = Json::parse(R"({"dtype": "float32", "shape": [1], "data": [1]})");
    j.erase(key);
    const std::string msg = parse_error_of([&] { array_from_json(j, "$.x"); });
    INFO(msg);
    CHECK(has(msg, "$.x"));
    CHECK(has(msg, std::string("missing key \"") + key + "\""));
  }
}

TEST_CASE("array_from_json: malformed fields name their path and what was expected") {
  CHECK(has(parse_error_of([] { array_from_json(Json::parse("[1, 2]"), "$.a"); }),
            "$.a: expected an array object"));
  CHECK(has(parse_error_of(
                [] { array_from_json(Json::parse(R"({"dtype": 3, "shape": [1], "data": [1]})")); }),
            "$.dtype"));
  CHECK(has(array_error(R"({"dtype": "float32", "shape": 2, "data": [1, 2]})"),
            "$.shape: expected a list of dimensions"));
  CHECK(has(array_error(R"({"dtype": "float32", "shape": [-1], "data": []})"), "$.shape[0]"));
  CHECK(has(array_error(R"({"dtype": "float32", "shape": [1], "data": 1})"),
            "$.data: expected a list of values"));
}

TEST_CASE("is_array_json: an object with exactly dtype, shape and data is an array") {
  CHECK(
      flaxpp::io::is_array_json(Json::parse(R"({"dtype": "bool", "shape": [], "data": [true]})")));
  CHECK_FALSE(flaxpp::io::is_array_json(Json::parse(R"({"dtype": "bool", "shape": []})")));
  CHECK_FALSE(flaxpp::io::is_array_json(
      Json::parse(R"({"dtype": "bool", "shape": [], "data": [true], "extra": 1})")));
  CHECK_FALSE(flaxpp::io::is_array_json(Json::parse("[1]")));
}

TEST_CASE("tree_from_json: nested objects become dicts flattened in sorted-key order") {
  const Tree t = tree_from_json(Json::parse(R"({
    "params": {
      "b": {"dtype": "float32", "shape": [1], "data": [3]},
      "a": {"z": {"dtype": "float32", "shape": [1], "data": [2]},
            "y": {"dtype": "int32", "shape": [1], "data": [1]}}
    },
    "aux": {"dtype": "bool", "shape": [], "data": [true]}
  })"));
  CHECK_FALSE(t.is_leaf());
  CHECK(t.keys() == std::vector<std::string>{"aux", "params"});
  const auto leaves = t.flatten();
  std::vector<std::string> paths;
  for (const auto& [path, array] : leaves)
    paths.push_back(path);
  CHECK(paths == std::vector<std::string>{"aux", "params/a/y", "params/a/z", "params/b"});
  CHECK(t.at("params/a/y").array().to_vector<std::int32_t>() == std::vector<std::int32_t>{1});
  CHECK(t.at("params/a/z").array().to_vector<float>() == std::vector<float>{2.0f});
  CHECK(t.at("params/b").array().to_vector<float>() == std::vector<float>{3.0f});
  CHECK(t.at("aux").array().dtype() == DType::bool_);
}

TEST_CASE("tree_from_json: an array at the root is a leaf with the empty path") {
  const Tree t =
      tree_from_json(Json::parse(R"({"dtype": "uint32", "shape": [2], "data": [0, 42]})"));
  CHECK(t.is_leaf());
  const auto leaves = t.flatten();
  REQUIRE(leaves.size() == 1);
  CHECK(leaves[0].first.empty());
  CHECK(leaves[0].second.to_vector<std::uint32_t>() == std::vector<std::uint32_t>{0u, 42u});
}

TEST_CASE("tree_from_json: an empty object is an empty dict") {
  const Tree t = tree_from_json(Json::object());
  CHECK_FALSE(t.is_leaf());
  CHECK(t.size() == 0);
  CHECK(t.flatten().empty());
}

TEST_CASE("tree_from_json: errors inside the tree name the nested path") {
  const std::string bad_leaf = parse_error_of([] {
    tree_from_json(
        Json::parse(R"({"params": {"w": {"dtype": "float32", "shape": [2], "data": [1]}}})"),
        "$.cases[1].expected");
  });
  INFO(bad_leaf);
  CHECK(has(bad_leaf, "$.cases[1].expected.params.w.data"));

  const std::string not_a_subtree =
      parse_error_of([] { tree_from_json(Json::parse(R"({"params": {"w": 3}})")); });
  INFO(not_a_subtree);
  CHECK(has(not_a_subtree, "$.params.w"));
  CHECK(has(not_a_subtree, "the number 3"));
}

TEST_CASE("tree_to_json: a tree round-trips through JSON text with its paths and values") {
  const Tree tree{
      {"params", Tree{{"Dense_0", Tree{{"kernel", f32({0.1f, -0.2f, 0.3f, 1e-7f}, Shape{2, 2})},
                                       {"bias", f32({0.0f, 1.0f}, Shape{2})}}}}},
      {"step", Array::scalar<std::int32_t>(7)},
  };
  const Json j = tree_to_json(tree);
  CHECK(j["params"]["Dense_0"]["kernel"]["dtype"] == "float32");
  CHECK(j["step"] == Json::parse(R"({"dtype": "int32", "shape": [], "data": [7]})"));

  const Tree back = tree_from_json(Json::parse(j.dump()));
  const auto want = tree.flatten();
  const auto got = back.flatten();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(want[i].first);
    CHECK(got[i].first == want[i].first);
    CHECK(got[i].second.dtype() == want[i].second.dtype());
    CHECK(got[i].second.shape() == want[i].second.shape());
  }
  CHECK(back.at("params/Dense_0/kernel").array().to_vector<float>() ==
        tree.at("params/Dense_0/kernel").array().to_vector<float>());
  CHECK(back.at("step").array().to_vector<std::int32_t>() == std::vector<std::int32_t>{7});
  CHECK(tree_to_json(back) == j);
}

TEST_CASE("read_json_file: a well-formed file is parsed") {
  const TempDir dir;
  const std::string file = dir.write("ok.json", R"({"format": "x", "cases": [1, 2.5, "NaN"]})");
  CHECK(read_json_file(file) == Json::parse(R"({"format": "x", "cases": [1, 2.5, "NaN"]})"));
}

TEST_CASE("read_json_file: a truncated file is a ParseError naming file:line:col") {
  const TempDir dir;
  const std::string file = dir.write("truncated.json", "{\n  \"a\": [1,\n  2");
  const std::string msg = parse_error_of([&] { read_json_file(file); });
  INFO(msg);
  CHECK(msg.rfind(file + ":3:4: ", 0) == 0);  // the end of "  2" on line 3
  CHECK(has(msg, "not valid JSON"));
}

TEST_CASE("read_json_file: a bare NaN token is a ParseError naming where it is") {
  const TempDir dir;
  const std::string file = dir.write("nan.json", "{\n  \"x\": NaN\n}\n");
  const std::string msg = parse_error_of([&] { read_json_file(file); });
  INFO(msg);
  CHECK(msg.rfind(file + ":2:8: ", 0) == 0);  // the N of NaN
  CHECK(has(msg, "\"NaN\""));                 // the hint to write the string instead
}

TEST_CASE("read_json_file: a file that does not exist is a ParseError naming it") {
  const TempDir dir;
  const std::string missing = dir.write("present.json", "{}") + ".absent";
  const std::string msg = parse_error_of([&] { read_json_file(missing); });
  INFO(msg);
  CHECK(has(msg, missing));
  CHECK(has(msg, "cannot open"));
}
