// flaxpp/transforms/tape.hpp — the tape of reverse mode, and how a primitive joins it: a
// traced graph replayed into the current (joint) trace equation by equation, the values that
// carry a tangent, the cotangents accumulated per value, and one equation's VJP. A higher-order
// primitive registers its reverse rule here (a checkpoint's region kept whole, a scan's
// residual-stacking loop, a cond split per branch; a primitive of your own the same way,
// docs/EXTENDING.md), so that the tape and linearize name no primitive. linearize.cpp drives
// it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "flaxpp/ir/graph.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::transforms {

// One primal equation replayed in the current trace, with its input and output values.
struct TapeEqn {
  const ir::Eqn* eqn;
  std::vector<Array> ins, outs;
};

class Cotangents;

// An item of the tape: what replaying one top-level equation left for the backward pass.
struct TapeEntry {
  virtual ~TapeEntry() = default;
  // The equation's results, as the rest of the replay reads them.
  virtual const std::vector<Array>& outputs() const = 0;
  // Adds the cotangents of the equation's operands from those of its results.
  virtual void backward(Cotangents& cts) const = 0;
};

// A plain equation: bound again, differentiated by its primitive's VJP rule.
struct EqnEntry final : TapeEntry {
  TapeEqn eqn;
  explicit EqnEntry(TapeEqn t) : eqn(std::move(t)) {}
  const std::vector<Array>& outputs() const override { return eqn.outs; }
  void backward(Cotangents& cts) const override;
};

class TangentSet;

// How reverse mode replays an equation of a higher-order primitive (JAX's partial-eval rule
// of remat_p and scan_p), registered by the primitive's own file.
struct ReverseRule {
  // Replays `e` on `ins` in the current trace, marking in `tangents` the results that carry a
  // tangent; the entry's backward differentiates it.
  std::function<std::unique_ptr<TapeEntry>(const ir::Eqn& e, std::vector<Array> ins,
                                           TangentSet& tangents)>
      replay;
  // Whether an equation of it inside a checkpoint region is replayed as its body's equations
  // (a region inside a region joins it: the outermost policy decides); only for a call
  // (ir::register_call), whose body that is.
  bool flatten_in_regions = false;
  // How the policy of a checkpoint region that holds an equation of it reaches inside it (JAX's
  // partial_eval_jaxpr_custom rule of cond_p): appends to `into`, a copy of the region's body
  // that holds `e`'s variables, the equations that replace `e` there, allocating any new
  // variables in it. Empty: the equation stays whole, and the policy decides on it as on any.
  using SplitFn = std::function<void(const ir::Eqn& e, const PolicyPtr& policy, ir::Graph& into)>;
  SplitFn split_in_region = {};
  // Whether the region keeps the outputs of `e`, a replacement made by split_in_region, whatever
  // its policy says of the primitive: they are what the policy saved inside it.
  std::function<bool(const ir::Eqn& e)> saved_in_region = {};
};
void register_reverse_rule(const ir::Primitive& prim, ReverseRule rule);
// nullptr for a primitive without one (differentiated by its VJP rule).
const ReverseRule* reverse_rule_of(const ir::Primitive& prim);

// A checkpoint equation's body.
const ir::Graph& body_of(const ir::Params& params);

// Zeros of `aval`: a symbolic zero cotangent made concrete.
Array zeros(const AVal& aval);

// The traced values that carry a tangent: the differentiated primals and everything computed
// from them (except through stop_gradient). Only they need cotangents.
class TangentSet {
 public:
  void add(const Array& x) {
    if (x.is_traced() && is_floating(x.dtype())) set_.insert(x.tracer());
  }
  bool has(const Array& x) const { return x.is_traced() && set_.count(x.tracer()) != 0; }
  // Marks an equation's outputs when one of its inputs carries a tangent.
  void propagate(const ir::Eqn& e, std::span<const Array> ins, std::span<const Array> outs) {
    if (e.prim == &lax::stop_gradient_p) return;
    if (std::any_of(ins.begin(), ins.end(), [&](const Array& x) { return has(x); }))
      for (const Array& y : outs)
        add(y);
  }

 private:
  std::unordered_set<const Tracer*> set_;
};

// Replays `g` on `inputs` in the current trace, handing every equation with its input values
// to `visit`, which returns the output values.
using EqnVisitor = std::function<std::vector<Array>(const ir::Eqn&, std::vector<Array> ins)>;
std::vector<Array> replay_graph(const ir::Graph& g, std::span<const Array> inputs,
                                const EqnVisitor& visit);

// Replays `g` flattening the equations whose reverse rule says so (checkpoint regions) into
// their bodies; every other equation is recorded in `eqns` in order. `saved` (if given) supplies
// the outputs of equation number i instead of recomputing it; `tangents` (if given) is propagated.
using SavedFn = std::function<std::optional<std::vector<Array>>(std::size_t index, const TapeEqn&)>;
std::vector<Array> replay_flat(const ir::Graph& g, std::span<const Array> inputs,
                               std::vector<TapeEqn>& eqns, const SavedFn& saved,
                               TangentSet* tangents);

// Replays `g` at the top level, one tape entry per equation: by its primitive's reverse rule
// where it has one (a checkpoint equation becomes a region), else replay_eqn.
using Tape = std::vector<std::unique_ptr<TapeEntry>>;
std::vector<Array> replay(const ir::Graph& g, std::span<const Array> inputs, Tape& tape,
                          TangentSet& tangents);
// One equation bound again in the current trace, its results' tangents propagated.
std::unique_ptr<TapeEntry> replay_eqn(const ir::Eqn& e, std::vector<Array> ins,
                                      TangentSet& tangents);

// Cotangents accumulated per traced value.
class Cotangents {
 public:
  void add(const Array& x, const Array& ct) {
    if (!ct.valid() || !x.is_traced() || !is_floating(x.dtype())) return;
    auto [it, inserted] = map_.try_emplace(x.tracer(), ct);
    if (!inserted) it->second = lax::add(it->second, ct);
  }
  Array get(const Array& x) const {
    if (!x.is_traced()) return Array();
    const auto it = map_.find(x.tracer());
    return it == map_.end() ? Array() : it->second;
  }

 private:
  std::unordered_map<const Tracer*, Array> map_;
};

// Adds the input cotangents of one equation, which `rule` computes from its output cotangents
// (invalid where zero), if any output has one.
using CotangentRule = std::function<std::vector<Array>(std::span<const Array> out_cts)>;
void backward_by(const TapeEqn& t, Cotangents& cts, const CotangentRule& rule);
// The same by its primitive's VJP rule.
void backward_eqn(const TapeEqn& t, Cotangents& cts);

}  // namespace flaxpp::transforms
