// scan(): traces the body into a scan equation; the scan primitive's shape rule and its eager
// evaluation (a loop that reads one row of each xs and writes one row of each ys per
// iteration). Its differentiation rule is in scan_ad.cpp.
#include "flaxpp/transforms/scan.hpp"

#include <algorithm>
#include <map>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "flaxpp/transforms/memory_analysis.hpp"
#include "flaxpp/transforms/trace.hpp"
#include "transforms/batching.hpp"
#include "transforms/scan_ad.hpp"

namespace flaxpp {
namespace {

struct ScanShape {
  std::size_t num_consts, num_carry;
  std::int64_t length;
  bool reverse;
};

ScanShape scan_shape(const ir::Params& params) {
  return {static_cast<std::size_t>(params.get<std::int64_t>("num_consts")),
          static_cast<std::size_t>(params.get<std::int64_t>("num_carry")),
          params.get<std::int64_t>("length"), params.get<bool>("reverse")};
}

// `aval` without its leading axis.
AVal row_of(const AVal& aval) {
  return {Shape(std::vector<std::int64_t>(aval.shape.dims().begin() + 1, aval.shape.dims().end())),
          aval.dtype};
}

std::vector<AVal> scan_avals(std::span<const AVal> in, const ir::Params& params) {
  const ir::Graph& g = transforms::body_of(params);
  const ScanShape s = scan_shape(params);
  FLAXPP_ASSERT(in.size() == g.invars.size(), "scan: ", in.size(), " operands for a body of ",
                g.invars.size(), " inputs");
  for (std::size_t i = 0; i < in.size(); ++i) {
    const AVal want = i < s.num_consts + s.num_carry
                          ? g.aval(g.invars[i])
                          : transforms::with_leading_axis(g.aval(g.invars[i]), s.length);
    FLAXPP_ASSERT(in[i] == want, "scan operand ", i, " is ", in[i], ", the body expects ", want);
  }
  std::vector<AVal> out;
  for (std::size_t k = 0; k < g.outvars.size(); ++k) {
    const AVal a = g.aval(g.outvars[k]);
    out.push_back(k < s.num_carry ? a : transforms::with_leading_axis(a, s.length));
  }
  return out;
}

// Whether the rows of an xs are read in place (views of its buffer) rather than copied: where
// a row's bytes are a multiple of 256, so that every row starts as aligned as the buffer (the
// alignment CUDA's allocations give and its kernels may assume). run_scan and its memory model
// follow the same rule.
bool read_in_place(const AVal& row) {
  constexpr std::int64_t kAlignment = 256;
  return row.nbytes() % kAlignment == 0;
}

// Row `t` of `x`: a view of its buffer, or a copy (the body's operands are whole arrays).
Array row(const Array& x, std::int64_t t) {
  const AVal r = row_of(x.aval());
  if (read_in_place(r)) return x.row_view(t);
  const std::int64_t bytes = x.nbytes() / x.shape()[0];
  Backend& be = x.buffer().backend();
  std::shared_ptr<Buffer> out = be.allocate(bytes);
  be.copy(x.buffer(), t * bytes, *out, 0, bytes);
  return Array(std::move(out), r.shape, r.dtype);
}

// For each result of the body: whether its buffer is the loop's own after an iteration whose
// inputs were `donated` (BodyPlans): a new buffer, or a donated input's; not a const's, nor an
// operand's carry passed through, nor a literal.
std::vector<bool> own_results(const ir::Graph& g, const MemoryAnalysis& body,
                              const std::vector<bool>& donated) {
  std::vector<bool> own(g.outvars.size());
  for (std::size_t k = 0; k < g.outvars.size(); ++k) {
    const std::ptrdiff_t from = body.output_origin[k];
    own[k] = !g.outvars[k].is_literal() && (from < 0 || donated[static_cast<std::size_t>(from)]);
  }
  return own;
}

// The body's plans (plan_memory's), iteration by iteration, for which of its inputs the
// iteration's arguments alone hold: its copied rows, and a carry the loop made. At most two
// patterns in practice (the first iteration and the others). run_scan runs each iteration on
// its plan, and scan_memory counts the same.
class BodyPlans {
 public:
  BodyPlans(const ir::Graph& g, const ScanShape& s)
      : g_(g), s_(s), donated_(g.invars.size()), rows_in_place_(g.outvars.size(), false) {
    for (std::size_t i = s.num_consts + s.num_carry; i < g.invars.size(); ++i)
      donated_[i] = !read_in_place(g.aval(g.invars[i]));
    // A ys row is asked for in place, in its stacked result, where it is aligned as the rows
    // read in place are, and its variable is no other result and no input.
    for (std::size_t k = s.num_carry; k < g.outvars.size(); ++k) {
      const ir::Atom& a = g.outvars[k];
      if (a.is_literal() || !read_in_place(g.aval(a.var)) ||
          std::find(g.invars.begin(), g.invars.end(), a.var) != g.invars.end())
        continue;
      rows_in_place_[k] = std::count_if(g.outvars.begin(), g.outvars.end(), [&](const ir::Atom& b) {
                            return !b.is_literal() && b.var == a.var;
                          }) == 1;
    }
  }
  // Which inputs the current iteration's arguments alone hold.
  const std::vector<bool>& donated() const { return donated_; }
  // The current iteration's plan.
  const MemoryAnalysis& plan() {
    auto it = plans_.find(donated_);
    if (it == plans_.end())
      it = plans_.emplace(donated_, plan_memory(g_, donated_, rows_in_place_)).first;
    return it->second;
  }
  // On to the next iteration, whose carry is this one's results (own_results).
  void advance(const std::vector<bool>& own) {
    std::copy(own.begin(), own.begin() + static_cast<std::ptrdiff_t>(s_.num_carry),
              donated_.begin() + static_cast<std::ptrdiff_t>(s_.num_consts));
  }

 private:
  const ir::Graph& g_;
  ScanShape s_;
  std::vector<bool> donated_;
  std::vector<bool> rows_in_place_;  // per result: a ys row asked for in its stacked result
  std::map<std::vector<bool>, MemoryAnalysis> plans_;
};

std::vector<Array> run_scan(std::span<const Array> in, const ir::Params& params) {
  const ir::Graph& g = transforms::body_of(params);
  const ScanShape s = scan_shape(params);
  std::vector<AVal> in_avals;
  for (const Array& x : in)
    in_avals.push_back(x.aval());
  const std::vector<AVal> out_avals = scan_avals(in_avals, params);
  const auto first_x = static_cast<std::ptrdiff_t>(s.num_consts + s.num_carry);
  std::vector<Array> carry(in.begin() + static_cast<std::ptrdiff_t>(s.num_consts),
                           in.begin() + first_x);
  // The stacked ys, allocated before the first iteration where the loop computes (its
  // operands' device): the body writes each row in place where its plan says so
  // (placed_outputs), and the loop copies the others in.
  std::vector<std::shared_ptr<Buffer>> ys(out_avals.size() - s.num_carry);
  if (s.length > 0) {
    Backend& be = backend(in.empty() ? default_device() : in.front().device());
    for (std::size_t k = 0; k < ys.size(); ++k)
      ys[k] = be.allocate(out_avals[s.num_carry + k].nbytes());
  }
  BodyPlans plans(g, s);
  std::vector<OutputDestination> rows(g.outvars.size());
  for (std::int64_t i = 0; i < s.length; ++i) {
    const std::int64_t t = s.reverse ? s.length - 1 - i : i;
    std::vector<Array> args(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(s.num_consts));
    args.insert(args.end(), std::make_move_iterator(carry.begin()),
                std::make_move_iterator(carry.end()));
    for (auto x = in.begin() + first_x; x != in.end(); ++x)
      args.push_back(row(*x, t));
    const MemoryAnalysis& plan = plans.plan();
    bool placing = false;
    for (std::size_t k = 0; k < ys.size(); ++k) {
      const std::int64_t bytes = g.aval(g.outvars[s.num_carry + k].var).nbytes();
      const bool placed = plan.placed_outputs[s.num_carry + k];
      rows[s.num_carry + k] = placed ? OutputDestination{ys[k], t * bytes} : OutputDestination{};
      placing = placing || placed;
    }
    std::vector<Array> outs = eval_graph(
        g, std::move(args), plan.buffers,
        placing ? std::span<const OutputDestination>(rows) : std::span<const OutputDestination>());
    plans.advance(own_results(g, plan, plans.donated()));
    carry.assign(std::make_move_iterator(outs.begin()),
                 std::make_move_iterator(outs.begin() + static_cast<std::ptrdiff_t>(s.num_carry)));
    for (std::size_t k = 0; k < ys.size(); ++k) {
      const Array& y = outs[s.num_carry + k];
      const auto* at = static_cast<const std::byte*>(ys[k]->data()) + t * y.nbytes();
      if (y.buffer().data() == at) continue;  // written in place
      const Array here = y.to(ys[k]->device());
      ys[k]->backend().copy(here.buffer(), 0, *ys[k], t * y.nbytes(), y.nbytes());
    }
  }
  std::vector<Array> results = std::move(carry);
  for (std::size_t k = 0; k < ys.size(); ++k) {
    const AVal& a = out_avals[s.num_carry + k];
    // No iteration (length 0): empty rows on the default device.
    results.push_back(ys[k] ? Array(std::move(ys[k]), a.shape, a.dtype)
                            : Array::full(a.shape, 0.0, a.dtype));
  }
  return results;
}

}  // namespace

const ir::Primitive scan_p("scan", scan_avals, transforms::scan_vjp, run_scan);

namespace {

// Batched (JAX's _scan_batching_rule), the scan runs its body batched: xs and ys keep their
// batch axis second, behind the scanned one; a carry is batched when its initial value or
// what the body makes of it differs between examples (the body is batched again until that
// settles), and the batched body's captured values join the consts.
ir::BatchedResults scan_batched(const ir::BatchArgs& a) {
  const ir::Graph& g = transforms::body_of(a.params);
  const ScanShape s = scan_shape(a.params);
  const std::size_t first_x = s.num_consts + s.num_carry;
  std::vector<bool> batched = a.batched;
  transforms::BatchedGraph b;
  for (;;) {
    std::vector<bool> carry_out(g.outvars.size(), false);
    std::copy(batched.begin() + static_cast<std::ptrdiff_t>(s.num_consts),
              batched.begin() + static_cast<std::ptrdiff_t>(first_x), carry_out.begin());
    b = transforms::batch_graph(g, batched, a.size, carry_out);
    bool settled = true;
    for (std::size_t k = 0; k < s.num_carry; ++k)
      if (b.out_batched[k] && !batched[s.num_consts + k]) {
        batched[s.num_consts + k] = true;
        settled = false;
      }
    if (settled) break;
  }
  std::vector<Array> operands = std::move(b.consts);
  const std::size_t captured = operands.size();
  for (std::size_t i = 0; i < a.inputs.size(); ++i) {
    Array x = a.inputs[i];
    if (batched[i]) x = ir::with_batch_axis(x, a.batched[i], a.size);  // a carry made batched
    if (i >= first_x && batched[i]) x = ir::move_axis(x, 0, 1);        // xs: scanned axis first
    operands.push_back(std::move(x));
  }
  ir::Params params = a.params;
  params.set("jaxpr", std::make_shared<const ir::Graph>(std::move(b.graph)));
  params.set("num_consts", static_cast<std::int64_t>(s.num_consts + captured));
  std::vector<Array> out = ir::bind(scan_p, operands, params);
  for (std::size_t k = s.num_carry; k < out.size(); ++k)
    if (b.out_batched[k]) out[k] = ir::move_axis(out[k], 1, 0);
  return {std::move(out), std::move(b.out_batched)};
}

// run_scan's memory, iteration by iteration (scan's memory model). An iteration copies the xs
// rows it does not read in place, runs the body on them and the carry (the body frees the
// copies, and a carry the loop made, after their last reader; the first carry is the
// operands'; a row read in place is the operand's memory), then copies into the stacked
// results, allocated before the first iteration, the ys rows the body did not write there in
// place (placed_outputs). Its results go at its end,
// except the carry, kept for the next. Exact unless a carry is not the loop's own at the end
// (passed through from an operand) or two carries share a buffer.
EqnMemory scan_memory(const ir::Graph& /*graph*/, const ir::Eqn& e) {
  const ir::Graph& g = transforms::body_of(e.params);
  const ScanShape s = scan_shape(e.params);
  const std::size_t first_x = s.num_consts + s.num_carry;
  EqnMemory m;
  if (s.length == 0) {  // the operands' carry and empty ys
    m.exact = false;
    return m;
  }
  BodyPlans plans(g, s);
  std::int64_t rows = 0;  // the copies'
  for (std::size_t i = first_x; i < g.invars.size(); ++i)
    if (plans.donated()[i]) rows += g.aval(g.invars[i]).nbytes();
  // The stacked results, allocated before the first iteration.
  std::int64_t live = 0;
  for (std::size_t k = s.num_carry; k < g.outvars.size(); ++k)
    live += g.aval(g.outvars[k].var).nbytes() * s.length;
  for (std::int64_t t = 0; t < s.length; ++t) {
    live += rows;
    m.peak = std::max(m.peak, live);
    const MemoryAnalysis& body = plans.plan();
    m.exact = m.exact && body.exact;
    m.peak = std::max(m.peak, live + body.peak_bytes - body.argument_bytes);
    live += body.end_bytes - body.argument_bytes;
    // Each result's buffer: its variable's, or the input's it holds; the loop's own unless an
    // operand (a const, the first carry) holds it too.
    const std::vector<bool> own = own_results(g, body, plans.donated());
    std::vector<ir::VarId> buffer(g.outvars.size());
    for (std::size_t k = 0; k < g.outvars.size(); ++k) {
      const ir::Atom& a = g.outvars[k];
      const std::ptrdiff_t from = body.output_origin[k];
      if (a.is_literal()) m.exact = false;  // a literal result's array is not modelled
      buffer[k] = from < 0 ? a.var : g.invars[static_cast<std::size_t>(from)];
    }
    // The iteration's end: its ys rows made apart go, unless a carry holds the same buffer
    // (a row written in place was never the body's).
    std::vector<ir::VarId> kept(buffer.begin(),
                                buffer.begin() + static_cast<std::ptrdiff_t>(s.num_carry));
    for (std::size_t k = s.num_carry; k < g.outvars.size(); ++k) {
      if (!own[k] || body.placed_outputs[k] ||
          std::find(kept.begin(), kept.end(), buffer[k]) != kept.end())
        continue;
      live -= g.aval(g.outvars[k].var).nbytes();
      kept.push_back(buffer[k]);  // freed once
    }
    for (std::size_t k = 0; k < s.num_carry; ++k)
      if (std::find(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(k), buffer[k]) !=
          buffer.begin() + static_cast<std::ptrdiff_t>(k))
        m.exact = false;  // two carries in one buffer: counted twice by the body's analysis
    plans.advance(own);
  }
  for (std::size_t k = 0; k < s.num_carry; ++k)
    m.exact =
        m.exact && plans.donated()[s.num_consts + k];  // an operand's carry is not a new result
  m.results = live;
  return m;
}

// A loop over its body, differentiated by its own reverse rule (scan_ad.cpp), its memory
// modelled iteration by iteration.
const bool scan_rules_registered = [] {
  ir::register_loop(scan_p, "jaxpr",
                    [](const ir::Eqn& e) { return e.params.get<std::int64_t>("length"); });
  register_memory_model(scan_p, scan_memory);
  ir::register_batching(scan_p, scan_batched);
  transforms::register_reverse_rule(scan_p, {.replay = transforms::replay_scan});
  return true;
}();
}  // namespace

ScanResult scan(const ScanBody& f, std::span<const Array> init, std::span<const Array> xs,
                std::optional<std::int64_t> length, bool reverse) {
  for (std::size_t k = 0; k < xs.size(); ++k) {
    if (xs[k].rank() == 0)
      throw ValueError(detail::str("scan: xs[", k, "] is a scalar (", xs[k].aval(),
                                   "); every xs needs a leading axis to scan over"));
    if (!length) length = xs[k].shape()[0];
    if (xs[k].shape()[0] != *length)
      throw ValueError(detail::str("scan: xs[", k, "] has a leading axis of ", xs[k].shape()[0],
                                   ", expected ", *length,
                                   " (the length, or the leading axis of xs[0]); every xs must "
                                   "have the same number of rows"));
  }
  if (!length)
    throw ValueError("scan: without xs the number of iterations is unknown; pass length");
  if (*length < 0) throw ValueError(detail::str("scan: length must be >= 0, got ", *length));
  std::vector<AVal> avals;
  for (const Array& c : init)
    avals.push_back(c.aval());
  for (const Array& x : xs)
    avals.push_back(row_of(x.aval()));
  std::size_t num_ys = 0;
  ir::Graph g = make_graph(
      [&](std::span<const Array> in) {
        ScanResult r = f(in.subspan(0, init.size()), in.subspan(init.size()));
        if (r.carry.size() != init.size())
          throw ValueError(detail::str("scan: the body returned ", r.carry.size(),
                                       " carry values for a carry of ", init.size()));
        for (std::size_t k = 0; k < init.size(); ++k)
          if (!r.carry[k].valid() || r.carry[k].aval() != init[k].aval())
            throw ValueError(detail::str(
                "scan: the body's carry[", k,
                "] must keep the shape and dtype of the initial "
                "carry, ",
                init[k].aval(), ", but the body returned ",
                r.carry[k].valid() ? r.carry[k].aval().str() : std::string("a null Array")));
        for (std::size_t k = 0; k < r.ys.size(); ++k)
          if (!r.ys[k].valid())
            throw ValueError(detail::str("scan: the body returned a null Array as ys[", k, "]"));
        num_ys = r.ys.size();
        std::vector<Array> out = std::move(r.carry);
        out.insert(out.end(), r.ys.begin(), r.ys.end());
        return out;
      },
      avals);
  // Captured values become explicit operands (the loop-invariant consts), as in checkpoint.
  std::vector<Array> operands = close_over_consts(g);
  const auto num_consts = static_cast<std::int64_t>(operands.size());
  operands.insert(operands.end(), init.begin(), init.end());
  operands.insert(operands.end(), xs.begin(), xs.end());
  const ir::Params params{{"jaxpr", std::make_shared<const ir::Graph>(std::move(g))},
                          {"num_consts", num_consts},
                          {"num_carry", static_cast<std::int64_t>(init.size())},
                          {"length", *length},
                          {"reverse", reverse}};
  std::vector<Array> out = ir::bind(scan_p, operands, params);
  ScanResult r;
  r.carry.assign(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(init.size()));
  r.ys.assign(out.begin() + static_cast<std::ptrdiff_t>(init.size()),
              out.begin() + static_cast<std::ptrdiff_t>(init.size() + num_ys));
  return r;
}

}  // namespace flaxpp
