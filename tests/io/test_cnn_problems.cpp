// The convolutional problems' inputs through the checker, as `flaxpp check` runs a file written
// by anyone: malformed padding, windows of the wrong length, group counts that do not divide,
// unknown pool and norm kinds and mismatched labels fail their case with a reason that names
// the input and what was expected (the committed cases run in ctest's flaxpp_check_refs).
#include <doctest/doctest.h>

#include <string>

#include "harness/errors.hpp"
#include "harness/refs_failure.hpp"

namespace {

using flaxpp::refs::Json;
using flaxpp::testing::f32_array;
using flaxpp::testing::failure;
using flaxpp::testing::has;

Json conv_inputs() {
  return Json{
      {"seed", 0}, {"x", f32_array({1, 4, 4, 2})}, {"features", 3}, {"kernel_size", {3, 3}}};
}

}  // namespace

TEST_CASE("check: conv cases with bad padding, windows or groups fail naming the input") {
  Json bad = conv_inputs();
  bad["padding"] = Json::array({Json::array({1, 1}), Json::array({1})});
  CHECK(has(failure("conv", bad), "inputs.padding: expected \"SAME\", \"VALID\" or a list of"));
  bad = conv_inputs();
  bad["padding"] = "FULL";
  CHECK(has(failure("conv", bad), "expected \"SAME\", \"SAME_LOWER\" or \"VALID\""));
  bad = conv_inputs();
  bad["kernel_size"] = {3};
  CHECK(has(failure("conv_grad", bad), "inputs.kernel_size: expected 2 positive integers"));
  bad = conv_inputs();
  bad["strides"] = {1, 0};
  CHECK(has(failure("conv", bad), "inputs.strides: expected 2 positive integers"));
  bad = conv_inputs();
  bad["feature_group_count"] = 3;
  CHECK(has(failure("conv", bad), "feature_group_count 3 must divide the input's features (2)"));
  bad = conv_inputs();
  bad["x"] = f32_array({4, 2});
  CHECK(has(failure("conv", bad), "inputs.x: expected float32 data of rank >= 3"));
}

TEST_CASE("check: pool, norm_grad and cnn_grad cases with bad kinds or labels fail clearly") {
  const Json x = f32_array({1, 4, 4, 2});
  CHECK(has(failure("pool", Json{{"x", x}, {"kind", "min"}, {"window_shape", {2, 2}}}),
            "inputs.kind: expected \"max\" or \"avg\", got \"min\""));
  CHECK(has(failure("pool_grad", Json{{"x", x}, {"kind", "max"}, {"window_shape", {2, 2, 2}}}),
            "inputs.window_shape: expected 2 positive integers"));
  CHECK(has(failure("norm_grad", Json{{"kind", "batchnorm"}, {"seed", 0}, {"x", x}}),
            "inputs.kind: expected \"rmsnorm\" or \"groupnorm\""));
  CHECK(
      has(failure("norm_grad", Json{{"kind", "groupnorm"}, {"seed", 0}, {"x", x}}), "num_groups"));
  const Json labels{{"dtype", "int32"}, {"shape", {2}}, {"data", {0, 1}}};
  CHECK(has(failure("cnn_grad", Json{{"seed", 0},
                                     {"x", x},
                                     {"labels", labels},
                                     {"features", {2}},
                                     {"classes", 3},
                                     {"policy", "none"}}),
            "expected x float32 [B, H, W, C] and labels int32 [B]"));
}
