// Tree: sorted nested dictionaries of arrays.
#include "flaxpp/core/tree.hpp"

#include <algorithm>

namespace flaxpp {

Tree::Tree(Array leaf) : is_leaf_(true), leaf_(std::move(leaf)) {}

Tree::Tree(std::initializer_list<std::pair<std::string, Tree>> items) {
  for (const auto& [k, v] : items)
    set(k, v);
}

namespace {
std::string joined_keys(const Tree& t) {
  std::string out;
  for (const auto& k : t.keys())
    out += (out.empty() ? "" : ", ") + k;
  return out;
}

// The first item whose key is not less than `key` (const or mutable, as `items` is).
template <class Items>
auto lower_bound_key(Items& items, std::string_view key) {
  return std::lower_bound(items.begin(), items.end(), key,
                          [](const auto& item, std::string_view k) { return item.first < k; });
}
}  // namespace

const Array& Tree::array() const {
  if (!is_leaf_)
    throw ValueError(
        detail::str("expected an array leaf, found a dict with keys [", joined_keys(*this), "]"));
  return leaf_;
}

bool Tree::contains(std::string_view key) const {
  if (is_leaf_) return false;
  auto it = lower_bound_key(items_, key);
  return it != items_.end() && it->first == key;
}

const Tree& Tree::operator[](std::string_view key) const {
  if (!contains(key))
    throw ValueError(detail::str("tree has no key \"", key, "\"",
                                 is_leaf_
                                     ? std::string(" (it is an array leaf)")
                                     : detail::str("; its keys are [", joined_keys(*this), "]")));
  return lower_bound_key(items_, key)->second;
}

const Tree& Tree::at(std::string_view path) const {
  const Tree* node = this;
  while (!path.empty()) {
    const std::size_t end = std::min(path.find('/'), path.size());
    node = &(*node)[path.substr(0, end)];
    path.remove_prefix(std::min(end + 1, path.size()));
  }
  return *node;
}

Tree Tree::from_items(std::vector<std::pair<std::string, Tree>> items) {
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto twice = std::adjacent_find(
      items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first == b.first; });
  if (twice != items.end())
    throw ValueError(detail::str("Tree::from_items: the key \"", twice->first,
                                 "\" is given twice; a dict's keys are unique"));
  Tree tree;
  tree.items_ = std::move(items);
  return tree;
}

void Tree::set(std::string key, Tree value) {
  if (is_leaf_) throw ValueError(detail::str("cannot set key \"", key, "\" on an array leaf"));
  // Readers and builders mostly set keys in sorted order: appending keeps that linear.
  if (items_.empty() || items_.back().first < key) {
    items_.emplace_back(std::move(key), std::move(value));
    return;
  }
  auto it = lower_bound_key(items_, key);
  if (it != items_.end() && it->first == key) {
    it->second = std::move(value);
  } else {
    items_.emplace(it, std::move(key), std::move(value));
  }
}

const Tree* Tree::find(std::span<const std::string> path) const {
  const Tree* node = this;
  for (const std::string& key : path) {
    if (!node->contains(key)) return nullptr;
    node = &(*node)[key];
  }
  return node;
}

void Tree::set_at(std::span<const std::string> path, Tree value) {
  FLAXPP_ASSERT(!path.empty(), "set_at needs a path");
  Tree* node = this;
  for (const std::string& key : path.first(path.size() - 1)) {
    if (node->is_leaf_)
      throw ValueError(detail::str("cannot set key \"", key, "\" on an array leaf"));
    auto it = lower_bound_key(node->items_, key);
    if (it == node->items_.end() || it->first != key) it = node->items_.emplace(it, key, Tree());
    node = &it->second;
  }
  node->set(path.back(), std::move(value));
}

std::vector<std::string> Tree::keys() const {
  std::vector<std::string> out;
  for (const auto& item : items_)
    out.push_back(item.first);
  return out;
}

namespace {
void flatten_into(const Tree& t, const std::string& prefix,
                  std::vector<std::pair<std::string, Array>>& out) {
  if (t.is_leaf()) {
    out.emplace_back(prefix, t.array());
    return;
  }
  for (const auto& [k, v] : t.items())
    flatten_into(v, prefix.empty() ? k : prefix + "/" + k, out);
}
}  // namespace

std::vector<std::pair<std::string, Array>> Tree::flatten() const {
  std::vector<std::pair<std::string, Array>> out;
  flatten_into(*this, "", out);
  return out;
}

std::vector<Array> Tree::leaves() const {
  std::vector<Array> out;
  for (auto& [path, leaf] : flatten())
    out.push_back(std::move(leaf));
  return out;
}

namespace {
Tree rebuild(const Tree& t, std::span<const Array> leaves, std::size_t& next) {
  if (t.is_leaf()) {
    FLAXPP_ASSERT(next < leaves.size(), "too few leaves");
    return Tree(leaves[next++]);
  }
  Tree out;
  for (const auto& [k, v] : t.items())
    out.set(k, rebuild(v, leaves, next));
  return out;
}
}  // namespace

Tree Tree::with_leaves(std::span<const Array> leaves) const {
  std::size_t next = 0;
  Tree out = rebuild(*this, leaves, next);
  if (next != leaves.size())
    throw ValueError(detail::str("Tree::with_leaves: the tree has ", next, " leaves, got ",
                                 leaves.size(), " arrays"));
  return out;
}

Tree tree_map(const Tree& tree, const std::function<Array(const Array&)>& fn) {
  std::vector<Array> out;
  for (const auto& [path, leaf] : tree.flatten())
    out.push_back(fn(leaf));
  return tree.with_leaves(out);
}

Tree tree_map(const Tree& a, const Tree& b,
              const std::function<Array(const Array&, const Array&)>& fn) {
  const auto la = a.flatten(), lb = b.flatten();
  std::vector<Array> out;
  for (std::size_t i = 0; i < la.size(); ++i) {
    if (i >= lb.size() || la[i].first != lb[i].first)
      throw ValueError(
          detail::str("tree_map: the trees differ in structure at \"", la[i].first, "\""));
    out.push_back(fn(la[i].second, lb[i].second));
  }
  if (la.size() != lb.size())
    throw ValueError("tree_map: the trees have different numbers of leaves");
  return a.with_leaves(out);
}

}  // namespace flaxpp
