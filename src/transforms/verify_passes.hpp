// Whether graph rewrites check their results (Graph::verify()): where FLAXPP_VERIFY_PASSES is
// set (the test suites set it to 1), and always in builds with assertions. jit checks after
// each pass; linearize after the joint graph and its partial evaluation; a checkpoint region
// after its backward body.
#pragma once

#include "flaxpp/ir/graph.hpp"

namespace flaxpp::transforms {

bool verify_passes();
// graph.verify() when verify_passes().
void verify_if_asked(const ir::Graph& graph);

}  // namespace flaxpp::transforms
