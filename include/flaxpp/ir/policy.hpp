// flaxpp/ir/policy.hpp — the interface of a rematerialisation policy (jax.checkpoint's
// `policy`): asked, for each primal equation of a checkpointed region, whether its outputs may
// be saved for the backward pass, must be recomputed there, or are offloaded to another memory
// kind. The policies themselves live in the transforms layer (checkpoint_policies).
#pragma once

#include <span>
#include <string>

#include "flaxpp/core/aval.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/ir/params.hpp"

namespace flaxpp::ir {

class Primitive;

struct Decision {
  enum class Kind { save, recompute, offload };
  Kind kind = Kind::recompute;
  MemoryKind src = MemoryKind::device;  // offload only
  MemoryKind dst = MemoryKind::pinned_host;

  static Decision save() { return {Kind::save}; }
  static Decision recompute() { return {Kind::recompute}; }
  static Decision offload(MemoryKind src, MemoryKind dst) { return {Kind::offload, src, dst}; }
  bool operator==(const Decision&) const = default;
};

class Policy {
 public:
  virtual ~Policy() = default;
  // JAX's policy(prim, *in_avals, **params).
  virtual Decision decide(const Primitive& prim, std::span<const AVal> inputs,
                          const Params& params) const = 0;
  // The policy as JAX spells it, e.g. "dots_with_no_batch_dims_saveable" or
  // "save_only_these_names('a', 'b')".
  virtual std::string str() const = 0;
};

}  // namespace flaxpp::ir
