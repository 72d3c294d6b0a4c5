// scan_p's differentiation rule (JAX's _scan_partial_eval and _scan_transpose): the body is
// linearised once (its joint forward/backward graph split by partial evaluation, checkpoint
// regions inside it by their policy), which names the residuals one iteration's backward
// reads. The forward scan runs the body's forward part and stacks those residuals along the
// loop axis; residuals that are the same in every iteration (a const operand, or computed from
// consts only) are kept once instead, and residuals that are rows of an xs operand are read
// from that operand. The backward scan runs in the opposite direction: its carry is the
// carry's cotangent plus an accumulator per const, its rows the stacked residuals, the xs the
// residuals come from and the cotangents of ys; its ys are the cotangents of xs.
#include <algorithm>
#include <unordered_map>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/transforms/scan.hpp"
#include "transforms/linearize.hpp"
#include "transforms/scan_ad.hpp"

namespace flaxpp::transforms {

// Where the backward scan reads one residual of the body.
struct ResidualSource {
  enum class From { invariant, stacked, xs } from;
  std::size_t index;  // into ScanTape::invariant, ScanTape::stacked, or the xs operands
};

struct ScanLinear {
  Linearized body;
  std::size_t num_consts = 0, num_carry = 0, num_xs = 0, num_ys = 0;
  std::int64_t length = 0;
  bool reverse = false;
  std::vector<ResidualSource> residuals;  // per residual of body.pe, in order
  // Per invariant residual: the const operand it is, or -1 for the next output of `hoist`.
  std::vector<std::ptrdiff_t> invariant_const;
  ir::Graph hoist;                           // consts -> the invariant residuals computed from them
  std::shared_ptr<const ir::Graph> forward;  // (consts, carry, x) -> (carry, y, stacked rows)
  std::vector<std::size_t> xs_read;          // the xs operands residuals are rows of
};

// A scan replayed for reverse mode: the body's linearisation, and the residuals its forward
// scan kept for the backward scan: loop-invariant ones once, the others stacked.
struct ScanTape {
  std::shared_ptr<const ScanLinear> lin;
  std::vector<Array> invariant, stacked;
};

namespace {

std::shared_ptr<const ScanLinear> linearize_scan(const ir::Params& params,
                                                 const std::vector<bool>& differentiable) {
  auto lin = std::make_shared<ScanLinear>();
  const auto body = params.get<std::shared_ptr<const ir::Graph>>("jaxpr");
  lin->num_consts = static_cast<std::size_t>(params.get<std::int64_t>("num_consts"));
  lin->num_carry = static_cast<std::size_t>(params.get<std::int64_t>("num_carry"));
  lin->num_xs = body->invars.size() - lin->num_consts - lin->num_carry;
  lin->num_ys = body->outvars.size() - lin->num_carry;
  lin->length = params.get<std::int64_t>("length");
  lin->reverse = params.get<bool>("reverse");
  std::vector<AVal> avals;
  for (ir::VarId v : body->invars)
    avals.push_back(body->aval(v));
  lin->body = linearize([&](std::span<const Array> in) { return eval_graph(*body, in); }, avals,
                        differentiable);

  const ir::Graph& known = lin->body.pe.known;
  const std::size_t num_out = body->outvars.size();
  const std::size_t num_res = lin->body.pe.num_residuals;
  FLAXPP_ASSERT(known.invars.size() == body->invars.size(), "scan: the forward part has ",
                known.invars.size(), " inputs for a body of ", body->invars.size());
  FLAXPP_ASSERT(known.outvars.size() == num_out + num_res,
                "scan: a cotangent of the body does not depend on the output cotangents; "
                "differentiating such a scan is not supported");
  // Which values of the forward part change from one iteration to the next.
  std::vector<bool> variant(known.num_vars(), false);
  std::unordered_map<ir::VarId, std::size_t> input_index;
  for (std::size_t k = 0; k < known.invars.size(); ++k) {
    input_index[known.invars[k]] = k;
    variant[static_cast<std::size_t>(known.invars[k])] = k >= lin->num_consts;
  }
  for (const ir::Eqn& e : known.eqns) {
    bool v = false;
    for (const ir::Atom& a : e.inputs)
      v = v || (!a.is_literal() && variant[static_cast<std::size_t>(a.var)]);
    for (ir::VarId o : e.outputs)
      variant[static_cast<std::size_t>(o)] = v;
  }
  std::vector<ir::Atom> forward_out(known.outvars.begin(),
                                    known.outvars.begin() + static_cast<std::ptrdiff_t>(num_out));
  std::vector<ir::Atom> hoisted;
  for (std::size_t j = 0; j < num_res; ++j) {
    const ir::Atom& r = known.outvars[num_out + j];
    const auto in = input_index.find(r.var);
    using From = ResidualSource::From;
    if (in != input_index.end() && in->second < lin->num_consts) {
      lin->residuals.push_back({From::invariant, lin->invariant_const.size()});
      lin->invariant_const.push_back(static_cast<std::ptrdiff_t>(in->second));
    } else if (in != input_index.end() && in->second >= lin->num_consts + lin->num_carry) {
      lin->residuals.push_back({From::xs, lin->xs_read.size()});
      lin->xs_read.push_back(in->second - lin->num_consts - lin->num_carry);
    } else if (variant[static_cast<std::size_t>(r.var)]) {
      lin->residuals.push_back({From::stacked, forward_out.size() - num_out});
      forward_out.push_back(r);
    } else {
      lin->residuals.push_back({From::invariant, lin->invariant_const.size()});
      lin->invariant_const.push_back(-1);
      hoisted.push_back(r);
    }
  }
  ir::Graph forward = known;
  forward.outvars = std::move(forward_out);
  ir::dce(forward);
  lin->forward = std::make_shared<const ir::Graph>(std::move(forward));
  lin->hoist = known;
  lin->hoist.outvars = std::move(hoisted);
  ir::dce(lin->hoist);
  lin->hoist.invars.resize(lin->num_consts);
  return lin;
}

}  // namespace

namespace {

// Binds, in the current trace, the scan of `params` on `ins` that also stacks the residuals,
// recording them in `tape`; returns the scan's outputs. The body is linearised with respect to
// the consts and xs in `tangents` and every floating carry; with no `tangents`, with respect
// to every floating input.
std::vector<Array> forward_scan(const ir::Params& params, std::span<const Array> ins,
                                const TangentSet* tangents, ScanTape& tape) {
  const auto num_consts = static_cast<std::size_t>(params.get<std::int64_t>("num_consts"));
  const auto num_carry = static_cast<std::size_t>(params.get<std::int64_t>("num_carry"));
  std::vector<bool> differentiable;
  for (std::size_t k = 0; k < ins.size(); ++k) {
    const bool carry = k >= num_consts && k < num_consts + num_carry;
    differentiable.push_back(tangents == nullptr || carry ? is_floating(ins[k].dtype())
                                                          : tangents->has(ins[k]));
  }
  tape.lin = linearize_scan(params, differentiable);
  const ScanLinear& lin = *tape.lin;
  const std::span<const Array> consts = ins.subspan(0, lin.num_consts);
  const std::vector<Array> hoisted = eval_graph(lin.hoist, consts);
  std::size_t next_hoisted = 0;
  for (std::ptrdiff_t c : lin.invariant_const)
    tape.invariant.push_back(c >= 0 ? ins[static_cast<std::size_t>(c)] : hoisted[next_hoisted++]);
  ir::Params forward = params;
  forward.set("jaxpr", lin.forward);
  std::vector<Array> outs = ir::bind(scan_p, ins, forward);
  const std::size_t num_out = lin.num_carry + lin.num_ys;
  tape.stacked.assign(outs.begin() + static_cast<std::ptrdiff_t>(num_out), outs.end());
  outs.resize(num_out);
  return outs;
}

// The cotangents of a scan's operands (invalid where none) from those of its outputs.
std::vector<Array> input_cotangents(std::span<const Array> ins, std::span<const Array> out_cts,
                                    const ScanTape& tape) {
  const ScanLinear& lin = *tape.lin;
  const Linearized& body = lin.body;
  const std::size_t nc = lin.num_consts, nk = lin.num_carry;
  const auto& avals = body.primal_avals;
  const std::vector<AVal>& out_avals = body.output_avals;
  // The backward carry: a cotangent per floating carry, then an accumulator per const that
  // gets one.
  std::vector<std::size_t> carries, accumulated;
  std::vector<Array> init;
  for (std::size_t k = 0; k < nk; ++k) {
    if (!is_floating(avals[nc + k].dtype)) continue;
    carries.push_back(k);
    init.push_back(out_cts[k].valid() ? out_cts[k] : zeros(avals[nc + k]));
  }
  for (std::size_t k = 0; k < nc; ++k)
    if (body.nonzero[k]) {
      accumulated.push_back(k);
      init.push_back(zeros(avals[k]));
    }
  // The backward rows: stacked residuals, xs that residuals are rows of, cotangents of ys.
  std::vector<Array> xs = tape.stacked;
  for (std::size_t j : lin.xs_read)
    xs.push_back(ins[nc + nk + j]);
  std::vector<std::ptrdiff_t> y_ct(lin.num_ys, -1);
  for (std::size_t j = 0; j < lin.num_ys; ++j)
    if (out_cts[nk + j].valid()) {
      y_ct[j] = static_cast<std::ptrdiff_t>(xs.size());
      xs.push_back(out_cts[nk + j]);
    }
  const ScanBody step = [&](std::span<const Array> carry, std::span<const Array> x) {
    std::vector<Array> args;
    for (const ResidualSource& r : lin.residuals) {
      switch (r.from) {
        case ResidualSource::From::invariant:
          args.push_back(tape.invariant[r.index]);
          break;
        case ResidualSource::From::stacked:
          args.push_back(x[r.index]);
          break;
        case ResidualSource::From::xs:
          args.push_back(x[tape.stacked.size() + r.index]);
          break;
      }
    }
    // Cotangents of the body's outputs: its carry's, then its ys'.
    std::size_t next_carry = 0;
    for (std::size_t k = 0; k < nk; ++k)
      args.push_back(is_floating(out_avals[k].dtype) ? carry[next_carry++] : zeros(out_avals[k]));
    for (std::size_t j = 0; j < lin.num_ys; ++j)
      args.push_back(y_ct[j] >= 0 ? x[static_cast<std::size_t>(y_ct[j])]
                                  : zeros(out_avals[nk + j]));
    std::vector<Array> cts(avals.size());
    const std::vector<Array> unknown = eval_graph(body.pe.unknown, args);
    for (std::size_t k = 0; k < unknown.size(); ++k)
      cts[body.unknown_input[k]] = unknown[k];
    ScanResult r;
    for (std::size_t k : carries)
      r.carry.push_back(cts[nc + k].valid() ? cts[nc + k] : zeros(avals[nc + k]));
    for (std::size_t i = 0; i < accumulated.size(); ++i) {
      const Array& ct = cts[accumulated[i]];
      const Array& acc = carry[carries.size() + i];
      r.carry.push_back(ct.valid() ? lax::add(acc, ct) : acc);
    }
    for (std::size_t j = 0; j < lin.num_xs; ++j)
      if (body.nonzero[nc + nk + j]) r.ys.push_back(cts[nc + nk + j]);
    return r;
  };
  const ScanResult r = scan(step, init, xs, lin.length, !lin.reverse);
  std::vector<Array> in_cts(ins.size());
  for (std::size_t i = 0; i < carries.size(); ++i)
    in_cts[nc + carries[i]] = r.carry[i];
  for (std::size_t i = 0; i < accumulated.size(); ++i)
    in_cts[accumulated[i]] = r.carry[carries.size() + i];
  std::size_t next_y = 0;
  for (std::size_t j = 0; j < lin.num_xs; ++j)
    if (body.nonzero[nc + nk + j]) in_cts[nc + nk + j] = r.ys[next_y++];
  return in_cts;
}

// A scan on the tape: the backward scan, from the cotangents of its outputs those of its
// operands.
struct ScanEntry final : TapeEntry {
  TapeEqn eqn;
  ScanTape tape;
  const std::vector<Array>& outputs() const override { return eqn.outs; }
  void backward(Cotangents& cts) const override {
    backward_by(eqn, cts, [&](std::span<const Array> out_cts) {
      return input_cotangents(eqn.ins, out_cts, tape);
    });
  }
};

}  // namespace

std::unique_ptr<TapeEntry> replay_scan(const ir::Eqn& e, std::vector<Array> ins,
                                       TangentSet& tangents) {
  if (std::none_of(ins.begin(), ins.end(), [&](const Array& x) { return tangents.has(x); }))
    return replay_eqn(e, std::move(ins), tangents);
  auto entry = std::make_unique<ScanEntry>();
  std::vector<Array> outs = forward_scan(e.params, ins, &tangents, entry->tape);
  tangents.propagate(e, ins, outs);
  entry->eqn = TapeEqn{&e, std::move(ins), std::move(outs)};
  return entry;
}

std::vector<Array> scan_vjp(const ir::VjpArgs& a) {
  ScanTape tape;
  forward_scan(a.params, a.inputs, nullptr, tape);
  return input_cotangents(a.inputs, a.cotangents, tape);
}

}  // namespace flaxpp::transforms
