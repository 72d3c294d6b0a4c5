// Helpers shared by the primitive definition files: shape-rule checks with clear errors and
// cotangent reshaping. Private to src/ir/primitives.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "flaxpp/core/aval.hpp"
#include "flaxpp/ir/lax.hpp"

namespace flaxpp::lax::rules {

[[noreturn]] void fail(const std::string& prim, const std::string& message);
void expect_arity(const std::string& prim, std::span<const AVal> in, std::size_t n);
// Equal dtypes, and equal shapes or one 0-d operand: the result aval. Bool operands only for
// a comparison.
AVal binary(const std::string& prim, std::span<const AVal> in, bool comparison = false);
void expect_floating(const std::string& prim, const AVal& a);
// The cotangent of an operand of aval `operand` from the cotangent of a broadcasting
// elementwise result: summed over all axes when the operand was 0-d.
Array unbroadcast(const Array& ct, const AVal& operand);
std::string avals_str(std::span<const AVal> in);

}  // namespace flaxpp::lax::rules
