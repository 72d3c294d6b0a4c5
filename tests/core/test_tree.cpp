// Tree: sorted dict access, paths and jax.tree_util flatten order.
#include <doctest/doctest.h>

#include "flaxpp/core/tree.hpp"

using namespace flaxpp;

namespace {
Array scalar(float v) {
  return Array::scalar(v);
}
}  // namespace

TEST_CASE("Tree: flatten visits sorted keys depth-first, as jax.tree_util does") {
  const Tree t{{"params", Tree{{"Dense_2", Tree{{"kernel", scalar(5)}, {"bias", scalar(6)}}},
                               {"Dense_10", Tree{{"kernel", scalar(3)}, {"bias", scalar(4)}}},
                               {"Dense_0", Tree{{"kernel", scalar(1)}, {"bias", scalar(2)}}}}}};
  std::vector<std::string> paths;
  for (const auto& [p, a] : t.flatten())
    paths.push_back(p);
  // String sort: Dense_10 before Dense_2.
  CHECK(paths == std::vector<std::string>{"params/Dense_0/bias", "params/Dense_0/kernel",
                                          "params/Dense_10/bias", "params/Dense_10/kernel",
                                          "params/Dense_2/bias", "params/Dense_2/kernel"});
}

TEST_CASE("Tree: at() follows a '/' path and a missing key names the keys that exist") {
  Tree t;
  t.set("params", Tree{{"Dense_0", Tree{{"kernel", scalar(1)}}}});
  CHECK(t.at("params/Dense_0/kernel").array().to_vector<float>() == std::vector<float>{1});
  CHECK(t.at("").size() == 1);
  CHECK_THROWS_WITH_AS(t.at("params/Dense_1"), doctest::Contains("its keys are [Dense_0]"),
                       ValueError);
  CHECK_THROWS_WITH_AS(t.at("params/Dense_0/kernel/x"), doctest::Contains("array leaf"),
                       ValueError);
}

TEST_CASE("Tree: set replaces an existing key and a leaf is not a dict") {
  Tree t;
  t.set("a", scalar(1));
  t.set("a", scalar(2));
  CHECK(t.size() == 1);
  CHECK(t["a"].array().to_vector<float>() == std::vector<float>{2});
  Tree leaf(scalar(3));
  CHECK(leaf.is_leaf());
  CHECK(leaf.flatten().size() == 1);
  CHECK(leaf.flatten()[0].first.empty());
  CHECK_THROWS_AS(leaf.set("x", scalar(1)), ValueError);
  CHECK_THROWS_WITH_AS(t.array(), doctest::Contains("found a dict with keys [a]"), ValueError);
}
