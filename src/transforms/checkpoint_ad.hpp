// checkpoint_p's reverse rule (checkpoint_ad.cpp), which checkpoint.cpp registers with the tape.
#pragma once

#include <memory>
#include <vector>

#include "flaxpp/transforms/tape.hpp"

namespace flaxpp::transforms {

// The region's equations replayed (regions inside it flattened into it), its policy kept; its
// backward is one checkpoint equation (differentiated) in the current trace, the policy
// deciding what it reads saved, offloaded or recomputed.
std::unique_ptr<TapeEntry> replay_region(const ir::Eqn& e, std::vector<Array> ins,
                                         TangentSet& tangents);

}  // namespace flaxpp::transforms
