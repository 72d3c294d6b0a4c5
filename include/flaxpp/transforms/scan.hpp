// flaxpp/transforms/scan.hpp — jax.lax.scan: a loop over the leading axis of its inputs whose
// body is traced once, so the graph does not grow with the length (scan over layers keeps one
// copy of its layer however deep the model). Differentiated as JAX does it: the forward scan
// stacks the per-iteration residuals the body's partial evaluation asks for (a checkpointed
// body saves only what its policy allows, e.g. just the carry under nothing_saveable), values
// that do not change between iterations are kept once, and the backward pass is a scan in the
// opposite direction (scan_ad.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp {

// What a scan body returns, and what scan returns: the carry, and the per-iteration outputs
// (stacked along a new leading axis by scan).
struct ScanResult {
  std::vector<Array> carry, ys;
};
// The body: (carry, one slice of each xs) -> (new carry, ys of this iteration). The new carry
// must have the carry's shapes and dtypes.
using ScanBody = std::function<ScanResult(std::span<const Array> carry, std::span<const Array> x)>;

// jax.lax.scan(f, init, xs, length, reverse): iteration i reads xs[k][i] for every k (the last
// first when `reverse`); ys[k][i] is what iteration i returned. `length` is needed when there
// are no xs, and must agree with their leading axis otherwise. Arrays the body captures
// (traced or not) become loop-invariant operands, as in JAX.
ScanResult scan(const ScanBody& f, std::span<const Array> init, std::span<const Array> xs,
                std::optional<std::int64_t> length = std::nullopt, bool reverse = false);

// The primitive (printed as scan): operands (consts, carry, xs); params "jaxpr" (the body:
// consts, carry, x slices -> carry, y slices), "num_consts", "num_carry", "length", "reverse".
extern const ir::Primitive scan_p;

}  // namespace flaxpp
