// linearize: trace, replay into the joint trace (the tape), partial evaluation.
#include "transforms/linearize.hpp"

#include "flaxpp/ir/passes.hpp"
#include "flaxpp/transforms/tape.hpp"
#include "transforms/verify_passes.hpp"

namespace flaxpp {
namespace {

using transforms::Cotangents;
using transforms::TangentSet;
using transforms::Tape;

// The joint function of a traced graph: (primals, output cotangents) -> (outputs, the non-zero
// input cotangents). `nonzero` records which inputs got a cotangent.
std::vector<Array> joint(const ir::Graph& g, std::span<const Array> in,
                         const std::vector<bool>& differentiable, std::vector<bool>& nonzero) {
  const std::size_t n = g.invars.size();
  Tape tape;
  TangentSet tangents;
  for (std::size_t i = 0; i < n; ++i)
    if (differentiable[i]) tangents.add(in[i]);
  std::vector<Array> results = replay(g, in.subspan(0, n), tape, tangents);
  Cotangents cts;
  for (std::size_t j = 0; j < results.size(); ++j)
    cts.add(results[j], in[n + j]);
  for (std::size_t i = tape.size(); i-- > 0;)
    tape[i]->backward(cts);
  nonzero.assign(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const Array ct = differentiable[i] ? cts.get(in[i]) : Array();
    if (!ct.valid()) continue;
    nonzero[i] = true;
    results.push_back(ct);
  }
  return results;
}

}  // namespace

Linearized linearize(const ArrayFn& f, std::span<const AVal> primal_avals,
                     std::vector<bool> differentiable) {
  if (differentiable.empty()) differentiable.assign(primal_avals.size(), true);
  if (differentiable.size() != primal_avals.size())
    throw ValueError(detail::str("vjp: the differentiable mask has ", differentiable.size(),
                                 " entries for ", primal_avals.size(), " inputs"));
  Linearized lin;
  lin.differentiable = differentiable;
  lin.primal_avals.assign(primal_avals.begin(), primal_avals.end());
  const ir::Graph g = make_graph(f, primal_avals);
  lin.num_outputs = g.outvars.size();
  for (const ir::Atom& a : g.outvars)
    lin.output_avals.push_back(g.aval(a));
  std::vector<AVal> joint_avals = lin.primal_avals;
  joint_avals.insert(joint_avals.end(), lin.output_avals.begin(), lin.output_avals.end());
  ir::Graph j = make_graph(
      [&](std::span<const Array> in) { return joint(g, in, differentiable, lin.nonzero); },
      joint_avals);
  ir::dce(j);
  transforms::verify_if_asked(j);
  std::vector<bool> unknown(joint_avals.size(), false);
  std::fill(unknown.begin() + static_cast<std::ptrdiff_t>(primal_avals.size()), unknown.end(),
            true);
  lin.pe = transforms::partial_eval(j, unknown);
  ir::dce(lin.pe.known);
  ir::dce(lin.pe.unknown);
  transforms::verify_if_asked(lin.pe.known);
  transforms::verify_if_asked(lin.pe.unknown);
  for (std::size_t k = 0; k < lin.num_outputs; ++k)
    FLAXPP_ASSERT(lin.pe.output_known[k], "a primal output depends on a cotangent");
  std::size_t slot = lin.num_outputs;
  for (std::size_t i = 0; i < lin.primal_avals.size(); ++i) {
    if (!lin.nonzero[i]) continue;
    if (!lin.pe.output_known[slot]) lin.unknown_input.push_back(i);
    ++slot;
  }
  return lin;
}

}  // namespace flaxpp
