// Policy specs: every form refs-format.md allows, and errors that name the bad part.
#include <doctest/doctest.h>

#include "flaxpp/io/policy_spec.hpp"

using namespace flaxpp;
using io::Json;

TEST_CASE("policy spec: names, \"none\" and objects with JAX's parameter names") {
  CHECK(io::policy_from_spec(Json("dots_saveable")).value()->str() == "dots_saveable");
  CHECK(io::policy_from_spec(Json("checkpoint_dots_with_no_batch_dims")).value()->str() ==
        "dots_with_no_batch_dims_saveable");
  CHECK_FALSE(io::policy_from_spec(Json("none")).has_value());
  CHECK(
      io::policy_from_spec(Json::parse(R"({"name": "save_only_these_names", "names": ["a", "b"]})"))
          .value()
          ->str() == "save_only_these_names('a', 'b')");
  CHECK(io::policy_from_spec(Json::parse(R"({"name": "nothing_saveable"})")).value()->str() ==
        "nothing_saveable");
  const auto both = io::policy_from_spec(Json::parse(
      R"({"name": "save_from_both_policies", "policies": ["dots_saveable", {"name": "save_any_names_but_these", "names": []}]})"));
  CHECK(both.value()->str() ==
        "save_from_both_policies(dots_saveable, save_any_names_but_these())");
  CHECK(io::policy_from_spec(
            Json::parse(R"({"name": "offload_dot_with_no_batch_dims", "offload_src": "device",
                                             "offload_dst": "pinned_host"})"))
            .has_value());
  CHECK(io::policy_from_spec_text("dots_saveable").has_value());
  CHECK(io::policy_from_spec_text(R"({"name": "save_any_names_but_these", "names": ["c"]})")
            .has_value());
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
}

TEST_CASE(
    "policy spec: a policy JAX rejects is a ValueError (overlapping saved and offloaded names)") {
  CHECK_THROWS_WITH_AS(
      io::policy_from_spec(Json::parse(R"({"name": "save_and_offload_only_these_names",
      "names_which_can_be_saved": ["a"], "names_which_can_be_offloaded": ["a"]})")),
      doctest::Contains("disjoint"), ValueError);
}
