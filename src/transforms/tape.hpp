// The tape of reverse mode (private to the transforms layer): a traced graph replayed into the
// current (joint) trace equation by equation, checkpoint regions kept whole, the values that
// carry a tangent, the cotangents accumulated per value, and one equation's VJP. autodiff.cpp
// drives it; checkpoint_ad.cpp differentiates the regions.
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

// A checkpointed region replayed inline: its (flattened) equations and its policy.
struct Region {
  PolicyPtr policy;
  ir::Params params;
  std::vector<Array> inputs, outputs;
  std::vector<bool> input_has_tangent;  // which inputs derive from the differentiated primals
  std::vector<TapeEqn> eqns;
};

// A scan replayed for reverse mode (scan_ad.cpp): the body's linearisation, and the residuals
// its forward scan kept for the backward scan: loop-invariant ones once, the others stacked.
struct ScanLinear;
struct ScanTape {
  std::shared_ptr<const ScanLinear> lin;
  std::vector<Array> invariant, stacked;
};

// A top-level item of the tape: a plain equation, a region, or a scan (whose `eqn` holds its
// operands and outputs).
struct TapeItem {
  TapeEqn eqn;
  std::unique_ptr<Region> region;
  std::unique_ptr<ScanTape> scan;
};

// A checkpoint equation's body.
const ir::Graph& body_of(const ir::Params& params);

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

// Replays `g` flattening checkpoint equations into their bodies; every other equation is
// recorded in `eqns` in order. `saved` (if given) supplies the outputs of equation number i
// instead of recomputing it; `tangents` (if given) is propagated.
using SavedFn = std::function<std::optional<std::vector<Array>>(std::size_t index, const TapeEqn&)>;
std::vector<Array> replay_flat(const ir::Graph& g, std::span<const Array> inputs,
                               std::vector<TapeEqn>& eqns, const SavedFn& saved,
                               TangentSet* tangents);

// Replays `g` at the top level: checkpoint equations become regions.
std::vector<Array> replay(const ir::Graph& g, std::span<const Array> inputs,
                          std::vector<TapeItem>& tape, TangentSet& tangents);

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

// The backward of a checkpoint region (checkpoint_ad.cpp): one checkpoint equation
// (differentiated) in the current trace, its policy deciding what it reads saved, offloaded
// or recomputed.
void backward_region(const Region& r, Cotangents& cts);

// scan_p's differentiation (scan_ad.cpp). forward_scan binds, in the current trace, the scan
// of `params` on `ins` that also stacks the residuals, recording them in `tape`; it returns the
// scan's outputs. The body is linearised with respect to the consts and xs in `tangents` and
// every floating carry (which may pick a tangent up in the loop); with no `tangents`, with
// respect to every floating input.
std::vector<Array> forward_scan(const ir::Params& params, std::span<const Array> ins,
                                const TangentSet* tangents, ScanTape& tape);
// The backward scan: from the cotangents of the scan's outputs, those of its operands.
void backward_scan(const TapeEqn& t, const ScanTape& tape, Cotangents& cts);
// scan_p's VJP rule, for a scan inside a checkpoint region (recomputed there): forward_scan
// and the backward scan in one.
std::vector<Array> scan_vjp(const ir::VjpArgs& args);

}  // namespace flaxpp::transforms
