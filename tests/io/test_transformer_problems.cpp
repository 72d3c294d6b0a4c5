// The transformer problems' inputs through the checker, as `flaxpp check` runs a file written
// by anyone: bad token ids, head counts, shapes and missing dropout seeds fail their case with
// a reason that names the input and what was expected (the committed cases themselves run in
// ctest's flaxpp_check_refs).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "flaxpp/io/json.hpp"
#include "flaxpp/io/refs.hpp"
#include "harness/errors.hpp"
#include "harness/refs_failure.hpp"

namespace {

using flaxpp::refs::Json;
using flaxpp::testing::f32_array;
using flaxpp::testing::failure;
using flaxpp::testing::has;

}  // namespace

TEST_CASE("check: an embed case with a token id past num_embeddings fails naming the id") {
  const Json tokens{{"dtype", "int32"}, {"shape", {3}}, {"data", {0, 9, 4}}};
  const std::string why = failure(
      "embed", Json{{"seed", 0}, {"tokens", tokens}, {"num_embeddings", 5}, {"features", 2}});
  CHECK(has(why, "num_embeddings 5): token ids: index 9 (element 1"));
  const Json floats = f32_array({3});
  CHECK(has(failure("embed",
                    Json{{"seed", 0}, {"tokens", floats}, {"num_embeddings", 5}, {"features", 2}}),
            "expected int32 token ids"));
}

TEST_CASE("check: attention cases with a bad head count, shape or dropout inputs fail") {
  const Json x = f32_array({2, 3, 6});
  CHECK(has(failure("attention", Json{{"seed", 0}, {"x", x}, {"num_heads", 4}, {"causal", true}}),
            "num_heads (4) must be > 0 and divide the qkv features (6)"));
  CHECK(
      has(failure("attention",
                  Json{{"seed", 0}, {"x", f32_array({3, 6})}, {"num_heads", 2}, {"causal", true}}),
          ".x: expected float32 data of rank >= 3"));
  CHECK(has(
      failure(
          "attention",
          Json{{"seed", 0}, {"x", x}, {"num_heads", 2}, {"causal", false}, {"dropout_rate", 0.5}}),
      ".dropout_seed: missing (required with a dropout_rate > 0)"));
  CHECK(has(failure("attention", Json{{"seed", 0},
                                      {"x", x},
                                      {"num_heads", 2},
                                      {"causal", false},
                                      {"dropout_rate", 1.5},
                                      {"dropout_seed", 1}}),
            "dropout_rate must be in [0, 1], got 1.5"));
  CHECK(
      has(failure("attention", Json{{"seed", 0}, {"x", x}, {"num_heads", 2}}), ".causal: missing"));
}

TEST_CASE("check: block_grad and block_loss cases need x [B, T, D] and a policy") {
  const Json x = f32_array({2, 3, 4});
  CHECK(has(failure("block_grad", Json{{"seed", 0},
                                       {"x", f32_array({2, 2, 3, 4})},
                                       {"num_heads", 2},
                                       {"mlp_dim", 8},
                                       {"policy", "none"}}),
            ".x: expected float32 data [B, T, D]"));
  CHECK(has(failure("block_grad", Json{{"seed", 0}, {"x", x}, {"num_heads", 2}, {"mlp_dim", 8}}),
            ".policy: missing"));
  CHECK(has(failure("saved_residuals", Json{{"function", "block_loss"},
                                            {"policy", "none"},
                                            {"seed", 0},
                                            {"x", x},
                                            {"num_heads", 2},
                                            {"mlp_dim", 8}}),
            "\"none\" is not valid for this problem"));
  CHECK(has(failure("saved_residuals", Json{{"function", "block"}, {"policy", "dots_saveable"}}),
            "expected checkpoint_dot_policy, named_dot_policy, mlp_loss, block_loss or "
            "conv_block_loss"));
}
