// flaxpp/core/tree.hpp — Tree: a nested dictionary of arrays (Flax's variable collections,
// gradients, optimiser state). A Tree is either a leaf (one Array) or a dict of named
// subtrees; paths are '/'-joined keys ("params/Dense_0/kernel"). Dict keys are kept sorted,
// which is the order jax.tree_util flattens dicts in.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "flaxpp/core/array.hpp"

namespace flaxpp {

class Tree {
 public:
  // The deepest nesting flaxpp's readers (JSON, safetensors, Flax msgpack) build. Tree's
  // operations (copy, flatten, destruction) recurse once per level, so a hostile file must not
  // nest thousands of levels deep; real state dicts are a few levels deep.
  static constexpr std::size_t kMaxDepth = 256;

  Tree() = default;  // an empty dict
  Tree(Array leaf);  // NOLINT(google-explicit-constructor): a leaf converts implicitly
  Tree(std::initializer_list<std::pair<std::string, Tree>> items);
  // A dict of `items` given in any order, sorted once: O(n log n) where n calls of set() may
  // take O(n^2). Throws ValueError naming a key that is given twice.
  static Tree from_items(std::vector<std::pair<std::string, Tree>> items);

  bool is_leaf() const { return is_leaf_; }
  // The leaf's array; throws ValueError for a dict.
  const Array& array() const;

  // Dict access. operator[] and at() throw ValueError naming the missing key and the keys
  // that exist; at() takes a '/'-joined path.
  bool contains(std::string_view key) const;
  const Tree& operator[](std::string_view key) const;
  const Tree& at(std::string_view path) const;
  // Inserts or replaces `key` (this must be a dict). A key after every existing one is appended
  // in O(1); others are inserted in O(size()), so build large dicts in key order or with
  // from_items.
  void set(std::string key, Tree value);
  // The subtree at a sequence of keys, or nullptr when the path does not exist.
  const Tree* find(std::span<const std::string> path) const;
  // Inserts or replaces the subtree at a sequence of keys, creating dicts on the way (a leaf on
  // the way is a ValueError). Iterative, and it copies nothing: paths set in sorted order
  // build a tree in O(total path length x log(width)).
  void set_at(std::span<const std::string> path, Tree value);
  std::vector<std::string> keys() const;
  std::size_t size() const { return items_.size(); }
  const std::vector<std::pair<std::string, Tree>>& items() const { return items_; }

  // Leaves in jax.tree_util order (sorted keys, depth first) with their paths. A leaf at the
  // root has the empty path.
  std::vector<std::pair<std::string, Array>> flatten() const;
  // Just the leaves, in flatten() order.
  std::vector<Array> leaves() const;
  // A tree of this structure with `leaves` (in flatten() order) in place of its own.
  Tree with_leaves(std::span<const Array> leaves) const;

 private:
  bool is_leaf_ = false;
  Array leaf_;
  std::vector<std::pair<std::string, Tree>> items_;  // sorted by key when a dict
};

namespace detail {
// For the typed transforms (jit, value_and_grad, vjp over Arrays and Trees): an argument of
// type X (Array or Tree) from its tree, and one of like's structure from `leaves`.
template <class X>
X tree_as(const Tree& t) {
  if constexpr (std::is_same_v<X, Array>) {
    return t.array();
  } else {
    return t;
  }
}
template <class X>
X with_leaves_like(const X& like, std::span<const Array> leaves) {
  if constexpr (std::is_same_v<X, Array>) {
    return leaves[0];
  } else {
    return like.with_leaves(leaves);
  }
}
}  // namespace detail

// jax.tree.map over the leaves of one tree, or of several trees of the same structure.
Tree tree_map(const Tree& tree, const std::function<Array(const Array&)>& fn);
Tree tree_map(const Tree& a, const Tree& b,
              const std::function<Array(const Array&, const Array&)>& fn);

}  // namespace flaxpp
