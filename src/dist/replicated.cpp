// Shards of a global batch, broadcasting a tree, and checking that replicas agree.
#include "flaxpp/dist/replicated.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "flaxpp/core/error.hpp"

namespace flaxpp::dist {

std::pair<std::int64_t, std::int64_t> shard_bounds(std::int64_t rows, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size || rows < 0)
    throw ValueError(::flaxpp::detail::str("shard_bounds: rank ", rank, " of ", size,
                                           " processes over ", rows,
                                           " rows; expected 0 <= rank < size and rows >= 0"));
  const std::int64_t base = rows / size, extra = rows % size;
  const std::int64_t begin = rank * base + std::min<std::int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

Tree broadcast_tree(Communicator& comm, const Tree& tree, int root) {
  std::vector<Array> leaves = tree.leaves();
  if (comm.size() == 1) return tree;
  for (Array& leaf : leaves)
    leaf = comm.broadcast(leaf, root);
  return tree.with_leaves(leaves);
}

namespace {

// FNV-1a over a leaf's bytes, as two 32-bit halves (the collectives carry uint32).
std::pair<std::uint32_t, std::uint32_t> leaf_hash(const Array& a) {
  const Array host = a.to(Device::cpu());
  const auto* bytes = static_cast<const unsigned char*>(host.buffer().data());
  std::uint64_t h = 14695981039346656037ull;
  for (std::int64_t i = 0; i < host.nbytes(); ++i) {
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  return {static_cast<std::uint32_t>(h >> 32), static_cast<std::uint32_t>(h)};
}

}  // namespace

void check_replicated(Communicator& comm, const Tree& tree, const char* what) {
  if (comm.size() == 1) return;
  const std::vector<std::pair<std::string, Array>> leaves = tree.flatten();
  std::vector<std::uint32_t> hashes;
  hashes.reserve(2 * leaves.size());
  for (const auto& [path, leaf] : leaves) {
    const auto [hi, lo] = leaf_hash(leaf);
    hashes.push_back(hi);
    hashes.push_back(lo);
  }
  const auto width = static_cast<std::int64_t>(hashes.size());
  const std::vector<std::uint32_t> all =
      comm.all_gather(Array::from_vector(hashes, Shape{width}, Device::cpu()))
          .to_vector<std::uint32_t>();
  for (int r = 1; r < comm.size(); ++r)
    for (std::size_t i = 0; i < hashes.size(); ++i)
      if (all[static_cast<std::size_t>(r * width) + i] != all[i])
        throw DistributedError(::flaxpp::detail::str(
            "the ", what, " of process ", r, " differ from process 0's at ", leaves[i / 2].first,
            ": the replicas of a data-parallel job must hold the same bits (every process must "
            "start from the same state and step on the same global batch)"));
}

}  // namespace flaxpp::dist
