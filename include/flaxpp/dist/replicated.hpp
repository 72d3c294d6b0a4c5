// flaxpp/dist/replicated.hpp — the state every process of a data-parallel job holds alike (its
// parameters and optimiser state), and the rows each one takes of a global batch: what DDP
// does when it starts (broadcast rank 0's state) and what it assumes at every step (identical
// replicas), made checkable.
#pragma once

#include <cstdint>
#include <utility>

#include "flaxpp/core/tree.hpp"
#include "flaxpp/dist/communicator.hpp"

namespace flaxpp::dist {

// Rows [begin, end) of `rows` that process `rank` of `size` takes: contiguous shards in rank
// order, the first rows % size of them one row longer, so that concatenating the shards gives
// the rows back in order.
std::pair<std::int64_t, std::int64_t> shard_bounds(std::int64_t rows, int rank, int size);

// `tree` of process `root` on every process; every process passes a tree of the same paths,
// shapes and dtypes (e.g. a freshly initialised state of the same model), on any device.
Tree broadcast_tree(Communicator& comm, const Tree& tree, int root = 0);

// Throws DistributedError, naming the first leaf and the first process whose bits differ from
// process 0's, unless every process holds the same bits in `tree` (one all_gather of a 64-bit
// hash per leaf). `what` names the tree in the message ("parameters").
void check_replicated(Communicator& comm, const Tree& tree, const char* what);

}  // namespace flaxpp::dist
