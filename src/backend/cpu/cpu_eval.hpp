// Eager evaluation of the lax primitives on the CPU backend: the reference implementation
// every other backend is compared against. Inputs are concrete CPU arrays.
#pragma once

#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/aval.hpp"
#include "flaxpp/ir/params.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::cpu {

// Computes `prim` on `inputs` (concrete CPU arrays the shape rule accepted; `out_avals` is
// its result) into new CPU arrays. Identity primitives may return an input array itself.
// Throws ValueError for a primitive or dtype the CPU backend does not implement, naming both.
std::vector<Array> eval(const ir::Primitive& prim, std::span<const Array> inputs,
                        const ir::Params& params, std::span<const AVal> out_avals);

// Registers the CPU kernels of the fused attention primitives (flaxpp/ir/lax_attention.hpp),
// whose several results are outside eval's table (cpu_attention.cpp).
void register_attention();

}  // namespace flaxpp::cpu
