// Policy and optimiser specs: every form refs-format.md allows, and errors that name the bad
// part.
#include <doctest/doctest.h>

#include "flaxpp/io/optimizer_spec.hpp"
#include "flaxpp/io/policy_spec.hpp"

using namespace flaxpp;
using io::Json;

TEST_CASE("policy spec: names, \"none\" and objects with JAX's parameter names") {
  CHECK(io::policy_from_spec(Json("dots_saveable"))->str() == "dots_saveable");
  CHECK(io::policy_from_spec(Json("checkpoint_dots_with_no_batch_dims"))->str() ==
        "dots_with_no_batch_dims_saveable");
  CHECK(checkpoint_policies::is_none(io::policy_from_spec(Json("none"))));
  CHECK(
      io::policy_from_spec(Json::parse(R"({"name": "save_only_these_names", "names": ["a", "b"]})"))

          ->str() == "save_only_these_names('a', 'b')");
  CHECK(io::policy_from_spec(Json::parse(R"({"name": "nothing_saveable"})"))->str() ==
        "nothing_saveable");
  const auto both = io::policy_from_spec(Json::parse(
      R"({"name": "save_from_both_policies", "policies": ["dots_saveable", {"name": "save_any_names_but_these", "names": []}]})"));
  CHECK(both->str() == "save_from_both_policies(dots_saveable, save_any_names_but_these())");
  CHECK(io::policy_from_spec(
            Json::parse(R"({"name": "offload_dot_with_no_batch_dims", "offload_src": "device",
                                             "offload_dst": "pinned_host"})")) != nullptr);
  CHECK(io::policy_from_spec_text("dots_saveable") != nullptr);
  CHECK(io::policy_from_spec_text(R"({"name": "save_any_names_but_these", "names": ["c"]})") !=
        nullptr);
}

TEST_CASE("policy spec: malformed specs are ParseErrors naming the path and what is accepted") {
  CHECK_THROWS_WITH_AS(
      io::policy_from_spec(Json("dots_savable"), "$.inputs.policy"),
      doctest::Contains("$.inputs.policy: unknown checkpoint policy \"dots_savable\""), ParseError);
  CHECK_THROWS_WITH_AS(io::policy_from_spec(Json::parse(R"({"name": "save_only_these_names"})")),
                       doctest::Contains("missing \"names\""), ParseError);
  CHECK_THROWS_WITH_AS(io::policy_from_spec(Json::parse(
                           R"({"name": "save_only_these_names", "names": ["a"], "x": 1})")),
                       doctest::Contains("does not take \"x\"; it takes: names"), ParseError);
  CHECK_THROWS_WITH_AS(
      io::policy_from_spec(Json::parse(R"({"name": "offload_dot_with_no_batch_dims",
                                                             "offload_dst": "unpinned_host"})")),
      doctest::Contains("offload_dst: unknown memory kind"), ParseError);
  CHECK_THROWS_WITH_AS(
      io::policy_from_spec(Json::parse(R"({"name": "save_from_both_policies", "policies": ["none",
                                                             "dots_saveable"]})")),
      doctest::Contains("\"none\" is not a policy"), ParseError);
  CHECK_THROWS_AS(io::policy_from_spec(Json(3)), ParseError);
  CHECK_THROWS_AS(io::policy_from_spec_text("{not json"), ParseError);
  // A "name" that is not a string is named as such (it was "expected … an object with a name").
  CHECK_THROWS_WITH_AS(io::policy_from_spec(Json::parse(R"({"name": 5})")),
                       doctest::Contains("$.name: expected a policy name string such as "
                                         "\"dots_saveable\""),
                       ParseError);
}

TEST_CASE(
    "policy spec: a policy JAX rejects is a ValueError (overlapping saved and offloaded names)") {
  CHECK_THROWS_WITH_AS(
      io::policy_from_spec(Json::parse(R"({"name": "save_and_offload_only_these_names",
      "names_which_can_be_saved": ["a"], "names_which_can_be_offloaded": ["a"]})")),
      doctest::Contains("disjoint"), ValueError);
}

TEST_CASE("policy spec: save_from_both_policies nested deeper than 64 levels is a ParseError") {
  // Built as text: nesting Json values copies the inner ones at every level.
  const auto nested = [](int levels) {
    std::string text = "\"nothing_saveable\"";
    for (int i = 0; i < levels; ++i)
      text =
          R"({"name": "save_from_both_policies", "policies": [)" + text + R"(, "dots_saveable"]})";
    return text;
  };
  CHECK(io::policy_from_spec(Json::parse(nested(64))) != nullptr);
  // 100k levels overflowed the stack; refused with the path of the level.
  std::string deep;
  for (int i = 0; i < 100000; ++i)
    deep += R"({"name": "save_from_both_policies", "policies": [)";
  deep += "\"nothing_saveable\"";
  for (int i = 0; i < 100000; ++i)
    deep += R"(, "dots_saveable"]})";
  CHECK_THROWS_WITH_AS(io::policy_from_spec(Json::parse(deep)),
                       doctest::Contains("save_from_both_policies is nested more than 64 levels"),
                       ParseError);
}

TEST_CASE("optimizer spec: step counts of schedules are checked, naming the path") {
  const auto error_of = [](const char* learning_rate) {
    try {
      io::optimizer_from_spec(Json{{"name", "sgd"}, {"learning_rate", Json::parse(learning_rate)}},
                              "opt");
    } catch (const ParseError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // A negative transition_begin overflowed count - transition_begin; decay_steps 0 divided by 0.
  CHECK(error_of(R"({"name": "linear", "init_value": 1, "end_value": 0, "transition_steps": 5,
                     "transition_begin": -9223372036854775807})") ==
        "opt.learning_rate.transition_begin: expected a step count in [0, 2147483647], got "
        "-9223372036854775807");
  CHECK(error_of(R"({"name": "cosine_decay", "init_value": 1, "decay_steps": 0})") ==
        "opt.learning_rate.decay_steps: expected a step count in [1, 2147483647], got 0");
  CHECK(error_of(R"({"name": "warmup_cosine_decay", "init_value": 0, "peak_value": 1,
                     "warmup_steps": 10, "decay_steps": 10})") ==
        "opt.learning_rate.decay_steps: expected a step count in [11, 2147483647], got 10");
  CHECK(error_of(R"({"name": "cosine_decay", "init_value": 1})") ==
        "opt.learning_rate: cosine_decay schedule needs \"decay_steps\"");
  CHECK(error_of(R"({"name": "linear", "init_value": 1, "end_value": 0, "transition_steps": 0})") ==
        "no error");  // optax: a constant init_value
}
