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

TEST_CASE("Tree: from_items sorts keys given in any order and refuses a key given twice") {
  std::vector<std::pair<std::string, Tree>> items;
  for (const char* k : {"b", "10", "a", "2"})
    items.emplace_back(k, scalar(1));
  const Tree t = Tree::from_items(std::move(items));
  CHECK(t.keys() == std::vector<std::string>{"10", "2", "a", "b"});
  std::vector<std::pair<std::string, Tree>> twice;
  twice.emplace_back("x", scalar(1));
  twice.emplace_back("y", Tree());
  twice.emplace_back("x", scalar(2));
  CHECK_THROWS_WITH_AS(Tree::from_items(std::move(twice)),
                       doctest::Contains("the key \"x\" is given twice"), ValueError);
}

TEST_CASE("Tree: set_at creates dicts on the way, replaces subtrees, refuses a leaf on the way") {
  Tree t;
  t.set_at(std::vector<std::string>{"a", "b", "c"}, scalar(1));
  t.set_at(std::vector<std::string>{"a", "d"}, scalar(2));
  CHECK(t.at("a/b/c").array().to_vector<float>() == std::vector<float>{1});
  CHECK(t.at("a").keys() == std::vector<std::string>{"b", "d"});
  t.set_at(std::vector<std::string>{"a", "b"}, scalar(3));
  CHECK(t.at("a/b").is_leaf());
  CHECK_THROWS_WITH_AS(t.set_at(std::vector<std::string>{"a", "b", "x"}, scalar(4)),
                       doctest::Contains("cannot set key \"x\" on an array leaf"), ValueError);
}

TEST_CASE("Tree: 100k keys, by set_at in sorted order or from_items in any order, build quickly") {
  // Issue 15: set_at copied the subtree it descended into and set inserted into the middle of a
  // sorted vector, so building a wide dict took O(n^2) time: minutes at this size.
  constexpr int kN = 100000;
  const Array leaf = scalar(0);
  // Not "k" + string: g++ 12 warns falsely (-Wrestrict) on that.
  const auto key = [](int i) { return std::string("k").append(std::to_string(i)); };
  std::vector<std::pair<std::string, Tree>> items;
  for (int i = kN - 1; i >= 0; --i)  // descending: each set() would insert at the front
    items.emplace_back(key(i), leaf);
  const Tree wide = Tree::from_items(std::move(items));
  CHECK(wide.size() == kN);
  CHECK(wide.keys().front() == "k0");
  Tree by_path;
  for (int i = 0; i < kN; ++i)
    by_path.set_at(std::vector<std::string>{"params", key(kN + i)}, leaf);
  CHECK(by_path["params"].size() == kN);
}
