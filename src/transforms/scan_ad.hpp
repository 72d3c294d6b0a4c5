// scan_p's differentiation (scan_ad.cpp), which scan.cpp registers: its reverse rule and its
// VJP rule.
#pragma once

#include <memory>
#include <vector>

#include "flaxpp/transforms/tape.hpp"

namespace flaxpp::transforms {

// The reverse rule: the scan bound again, stacking the residuals its backward scan reads, with
// the body linearised with respect to the consts and xs that carry a tangent and every
// floating carry (which may pick a tangent up in the loop); a scan no tangent reaches is a
// plain equation.
std::unique_ptr<TapeEntry> replay_scan(const ir::Eqn& e, std::vector<Array> ins,
                                       TangentSet& tangents);
// The VJP rule, for a scan inside a checkpoint region (recomputed there): the forward scan and
// the backward scan in one.
std::vector<Array> scan_vjp(const ir::VjpArgs& args);

}  // namespace flaxpp::transforms
