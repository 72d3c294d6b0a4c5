// fuse_elementwise: chains of elementwise equations over arrays of one shape and floating
// dtype become one fused_elementwise equation (XLA's loop fusion), so that their
// intermediates never reach memory and a backend runs one pass (one CUDA kernel) instead of
// one per operation. Every instruction applies the same flaxpp/kernels/elementwise.hpp functor to
// the same element type as the primitive it replaces, so results keep their bits.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "ir/def_use.hpp"

namespace flaxpp::ir {
namespace {

using Op = ElementwiseProgram::Op;

// The program operation of an elementwise primitive (select_n and convert_element_type are
// handled apart), if the fusion pass may put it into a program: those whose line of
// flaxpp/kernels/elementwise.hpp's lists has an empty `unfused` column, and integer_pow.
std::optional<Op> op_of(const Primitive* p) {
  const std::optional<Op> op = program_op(*p);
  if (!op || *kernels::program_op_unfused_reason(*op) != '\0') return std::nullopt;
  return op;
}

// A literal's value as a double, exactly (16-bit ones from their bits on the host).
double literal_value(const Array& lit) {
  switch (lit.dtype()) {
    case DType::f32:
      return lit.item<float>();
    case DType::bf16:
    case DType::f16: {
      std::uint16_t bits = 0;
      const Array host = lit.to(Device::cpu());
      std::memcpy(&bits, host.buffer().data(), sizeof bits);
      return lit.dtype() == DType::bf16 ? bfloat16_bits_to_double(bits)
                                        : float16_bits_to_double(bits);
    }
    default:
      return lit.item<double>();
  }
}

struct Cluster {
  AVal aval;              // every full-shape value's
  std::size_t first = 0;  // its first equation, where the fused one goes
  std::vector<std::size_t> eqns;
};

class Fuser {
 public:
  Fuser(Graph& g, FusionOptions options) : g_(g), options_(options), uses_(g) {}
  int run();

 private:
  // The aval of the cluster equation `e` would form or join (its result's, or for a
  // comparison its operands'), if `e` can be fused at all.
  std::optional<AVal> fusible(const Eqn& e) const;
  // Whether `a` can be read by a cluster over `aval`: a literal or variable of its dtype, of
  // its shape or 0-d.
  bool operand_fits(const Atom& a, const AVal& aval) const;
  bool bool_consumers_fusible(VarId v, DType d) const;
  // What a program reads for operand `a`: a 0-d operand broadcast to a shape (full_like,
  // zeros_like) as that operand (a fused program broadcasts scalars itself); an array that
  // broadcast_in_dim repeats along leading and trailing axes (a softmax's row maximum, a
  // bias, a causal mask) as that array, read as a broadcast with `inner` > 0
  // (ElementwiseProgram::broadcasts); anything else as itself.
  struct Read {
    Atom atom;
    std::int64_t inner = 0;
  };
  Read through_broadcast(const Atom& a) const;
  // The trailing axes a reduce_sum or reduce_max `e` folds, if a program can take it as a row
  // reduction (of a fusible dtype, over non-empty rows of its last axes); else 0.
  int row_axes(const Eqn& e) const;
  // The cluster that can take row reduction `r` (row_axes(g_.eqns[r]) > 0): the one that
  // computes its operand, else the first to read the operand element by element (not through
  // a broadcast) and start before r; -1 for none.
  std::ptrdiff_t row_reduction_cluster(std::size_t r, const std::vector<Cluster>& clusters,
                                       const std::vector<std::ptrdiff_t>& cluster_of) const;
  // Replaces cluster `c` and the row reductions it takes (`reductions`, over `axes` trailing
  // axes) by one fused equation, where that is worth it and fits a program.
  void build(const Cluster& c, const std::vector<std::size_t>& reductions, int axes,
             std::vector<Eqn>& replaced, std::vector<bool>& drop);

  // float32 and float64 always; bfloat16 and float16 where the backend rounds each
  // instruction's result to them (a 16-bit value rounds after every primitive).
  bool fusible_dtype(DType d) const {
    return d == DType::f32 || d == DType::f64 ||
           (options_.sixteen_bit && (d == DType::bf16 || d == DType::f16));
  }

  Graph& g_;
  FusionOptions options_;
  DefUse uses_;
};

// The inner size with which a program reads the operand of a broadcast_in_dim of `from` into
// `to` as a broadcast (element e of the result is the operand's (e / inner) % size): where the
// result's axes the operand fills (of size > 1) are one run, in the operand's order, the
// product of the axes after it; 0 where they are not (a transpose, or repeats between them).
std::int64_t broadcast_read_inner(const Shape& from, const std::vector<std::int64_t>& dims,
                                  const Shape& to) {
  std::vector<bool> filled(static_cast<std::size_t>(to.rank()), false);
  std::int64_t previous = -1;
  for (std::int64_t i = 0; i < from.rank(); ++i) {
    if (from[i] == 1) continue;
    const std::int64_t k = dims[static_cast<std::size_t>(i)];
    if (k <= previous) return 0;
    filled[static_cast<std::size_t>(k)] = true;
    previous = k;
  }
  std::int64_t first = -1, last = -1;
  for (std::int64_t k = 0; k < to.rank(); ++k)
    if (to[k] != 1 && filled[static_cast<std::size_t>(k)]) {
      if (first < 0) first = k;
      last = k;
    }
  for (std::int64_t k = first + 1; k < last; ++k)
    if (to[k] != 1 && !filled[static_cast<std::size_t>(k)]) return 0;
  std::int64_t inner = 1;
  for (std::int64_t k = last + 1; k < to.rank(); ++k)
    inner *= to[k];
  return to.size() == 0 ? 0 : inner;
}

Fuser::Read Fuser::through_broadcast(const Atom& a) const {
  if (a.is_literal()) return {a};
  const std::ptrdiff_t p = uses_.producer[static_cast<std::size_t>(a.var)];
  if (p < 0) return {a};
  const Eqn& e = g_.eqns[static_cast<std::size_t>(p)];
  if (e.prim != &lax::broadcast_in_dim_p || g_.aval(e.inputs[0]).dtype != g_.aval(a).dtype)
    return {a};
  const Shape& from = g_.aval(e.inputs[0]).shape;
  if (from.rank() == 0) return {e.inputs[0]};
  if (e.inputs[0].is_literal()) return {a};
  const std::int64_t inner = broadcast_read_inner(
      from, e.params.get<std::vector<std::int64_t>>("broadcast_dimensions"), g_.aval(a).shape);
  if (inner == 0) return {a};
  return {e.inputs[0], inner};
}

bool Fuser::operand_fits(const Atom& a, const AVal& aval) const {
  const AVal got = g_.aval(a);
  if (got.dtype != aval.dtype) return false;
  if (a.is_literal()) return got.shape.rank() == 0;
  return got.shape == aval.shape || got.shape.rank() == 0;
}

bool Fuser::bool_consumers_fusible(VarId v, DType d) const {
  if (uses_.output[static_cast<std::size_t>(v)]) return false;
  for (const std::size_t k : uses_.readers[static_cast<std::size_t>(v)]) {
    const Eqn& c = g_.eqns[k];
    const bool as_which = c.prim == &lax::select_n_p && c.inputs.size() == 3 &&
                          !c.inputs[0].is_literal() && c.inputs[0].var == v &&
                          std::none_of(c.inputs.begin() + 1, c.inputs.end(), [&](const Atom& a) {
                            return !a.is_literal() && a.var == v;
                          });
    const bool as_value =
        c.prim == &lax::convert_element_type_p && g_.aval(c.outputs[0]).dtype == d;
    if (!as_which && !as_value) return false;
  }
  return true;
}

std::optional<AVal> Fuser::fusible(const Eqn& e) const {
  if (e.outputs.size() != 1) return std::nullopt;
  const AVal out = g_.aval(e.outputs[0]);
  if (e.prim == &lax::select_n_p) {
    // select_n(which, case0, case1): `which` a fused comparison's bool or a mask from memory
    // (decided on joining).
    if (e.inputs.size() != 3 || e.inputs[0].is_literal() || !fusible_dtype(out.dtype))
      return std::nullopt;
    if (!operand_fits(e.inputs[1], out) || !operand_fits(e.inputs[2], out)) return std::nullopt;
    return out;
  }
  if (e.prim == &lax::convert_element_type_p) {
    // bool -> float of a fused comparison: the comparison's 1 or 0 itself.
    if (e.inputs[0].is_literal() || g_.aval(e.inputs[0]).dtype != DType::bool_ ||
        !fusible_dtype(out.dtype))
      return std::nullopt;
    return out;
  }
  const std::optional<Op> op = op_of(e.prim);
  if (!op) return std::nullopt;
  const bool comparison = kernels::program_op_is_comparison(*op);
  const AVal aval = comparison ? AVal{out.shape, g_.aval(e.inputs[0]).dtype} : out;
  if (!fusible_dtype(aval.dtype)) return std::nullopt;
  for (const Atom& a : e.inputs)
    if (!operand_fits(a, aval)) return std::nullopt;
  if (comparison && !bool_consumers_fusible(e.outputs[0], aval.dtype)) return std::nullopt;
  return aval;
}

int Fuser::row_axes(const Eqn& e) const {
  if (!options_.row_reductions || (e.prim != &lax::reduce_sum_p && e.prim != &lax::reduce_max_p) ||
      e.inputs[0].is_literal())
    return 0;
  const AVal x = g_.aval(e.inputs[0]);
  const auto& axes = e.params.get<std::vector<std::int64_t>>("axes");
  const auto m = static_cast<std::int64_t>(axes.size());
  if (!fusible_dtype(x.dtype) || m == 0 || x.shape.size() == 0) return 0;
  for (std::int64_t k = 0; k < m; ++k)  // sorted and distinct: the last m axes
    if (axes[static_cast<std::size_t>(k)] != x.shape.rank() - m + k) return 0;
  return static_cast<int>(m);
}

std::ptrdiff_t Fuser::row_reduction_cluster(std::size_t r, const std::vector<Cluster>& clusters,
                                            const std::vector<std::ptrdiff_t>& cluster_of) const {
  const Atom& x = g_.eqns[r].inputs[0];
  const AVal aval = g_.aval(x);
  const auto takes = [&](std::ptrdiff_t c) {
    return c >= 0 && clusters[static_cast<std::size_t>(c)].aval == aval;
  };
  // Its fused equation stands at the cluster's first equation, which comes before r, so the
  // reduction's readers (after r) see its result; a member of the cluster never reads it (a
  // member reads nothing made at or after the cluster's first equation but by the cluster).
  const std::ptrdiff_t p = uses_.producer[static_cast<std::size_t>(x.var)];
  if (p >= 0) {
    const std::ptrdiff_t c = cluster_of[static_cast<std::size_t>(p)];
    if (c >= 0) return takes(c) ? c : -1;
  }
  // A broadcast the cluster reads through is not among its values.
  const Read read = through_broadcast(x);
  if (read.atom.is_literal() || read.atom.var != x.var) return -1;
  for (const std::size_t k : uses_.readers[static_cast<std::size_t>(x.var)]) {
    const std::ptrdiff_t c = cluster_of[k];
    if (k < r && takes(c) && clusters[static_cast<std::size_t>(c)].first < r) return c;
  }
  return -1;
}

int Fuser::run() {
  // Greedy, in program order: an equation joins the cluster of an operand's producer when
  // every other operand it reads from outside that cluster exists before the cluster's first
  // equation (so the fused equation can stand there); else it starts a cluster of its own.
  std::vector<Cluster> clusters;
  std::vector<std::ptrdiff_t> cluster_of(g_.eqns.size(), -1);
  for (std::size_t i = 0; i < g_.eqns.size(); ++i) {
    const Eqn& e = g_.eqns[i];
    const std::optional<AVal> aval = fusible(e);
    if (!aval) continue;
    const auto in_cluster = [&](const Atom& a, std::ptrdiff_t c) {
      if (a.is_literal()) return false;
      const std::ptrdiff_t p = uses_.producer[static_cast<std::size_t>(a.var)];
      return p >= 0 && cluster_of[static_cast<std::size_t>(p)] == c;
    };
    const auto can_join = [&](std::ptrdiff_t c) {
      const Cluster& cl = clusters[static_cast<std::size_t>(c)];
      if (cl.aval != *aval) return false;
      for (const Atom& operand : e.inputs) {
        const Atom a = in_cluster(operand, c) ? operand : through_broadcast(operand).atom;
        if (a.is_literal() || in_cluster(a, c)) continue;
        const std::ptrdiff_t p = uses_.producer[static_cast<std::size_t>(a.var)];
        if (p >= static_cast<std::ptrdiff_t>(cl.first)) return false;
      }
      return true;
    };
    // select_n and convert read a bool: computed in its comparison's cluster where they can
    // join it, else read from memory as a mask operand (relu's mask of the forward pass, read
    // by the backward pass's select).
    const bool needs_bool = e.prim == &lax::select_n_p || e.prim == &lax::convert_element_type_p;
    std::ptrdiff_t joined = -1;
    // Joins the cluster of equation `k` (-1: none) if nothing was joined yet and it can.
    const auto try_join = [&](std::ptrdiff_t k) {
      const std::ptrdiff_t c = k >= 0 ? cluster_of[static_cast<std::size_t>(k)] : -1;
      if (joined < 0 && c >= 0 && can_join(c)) joined = c;
    };
    if (needs_bool) {
      try_join(uses_.producer[static_cast<std::size_t>(e.inputs[0].var)]);
      if (joined < 0 && g_.aval(e.inputs[0]).shape != aval->shape)
        continue;  // a 0-d bool from memory: no mask operand
    }
    for (const Atom& a : e.inputs)
      if (!a.is_literal()) try_join(uses_.producer[static_cast<std::size_t>(a.var)]);
    // An equation reading a value an earlier cluster reads too joins that cluster (XLA's
    // sibling fusion): the value is read once, and what the equation makes need not be stored
    // where the cluster reads it (GELU's gradient: product * x and product * tanh' in one
    // program). The fused equation computes it at the cluster's first equation, so it joins
    // only a cluster that every equation since then belongs to: nothing runs in between, and
    // nothing lives longer (a backward pass's reader of a forward value stays where it is). A
    // comparison joins any earlier reader: its bool is then taken where the value is made
    // (relu's mask of a product that its max reads), so the value need not live on to the
    // mask's readers (a remat'd backward pass's select_n).
    const bool comparison = g_.aval(e.outputs[0]).dtype == DType::bool_;
    const auto sibling = [&](std::size_t k) {
      const std::ptrdiff_t c = cluster_of[k];
      if (c < 0 || comparison) return c >= 0;
      const Cluster& cl = clusters[static_cast<std::size_t>(c)];
      return cl.eqns.size() == i - cl.first;  // its members are every equation since its first
    };
    if (!needs_bool)
      for (const Atom& a : e.inputs)
        if (!a.is_literal())
          for (const std::size_t k : uses_.readers[static_cast<std::size_t>(a.var)])
            if (k < i && sibling(k)) try_join(static_cast<std::ptrdiff_t>(k));
    if (joined < 0) {
      joined = static_cast<std::ptrdiff_t>(clusters.size());
      clusters.push_back({*aval, i, {}});
    }
    clusters[static_cast<std::size_t>(joined)].eqns.push_back(i);
    cluster_of[i] = joined;
  }

  // Row reductions join the cluster of their operand, each cluster's over one number of
  // trailing axes (its first's).
  std::vector<std::vector<std::size_t>> reductions(clusters.size());
  std::vector<int> axes(clusters.size(), 0);
  for (std::size_t r = 0; r < g_.eqns.size(); ++r) {
    const int m = row_axes(g_.eqns[r]);
    if (m == 0) continue;
    const std::ptrdiff_t c = row_reduction_cluster(r, clusters, cluster_of);
    if (c < 0) continue;
    const auto k = static_cast<std::size_t>(c);
    if (axes[k] != 0 && axes[k] != m) continue;
    axes[k] = m;
    reductions[k].push_back(r);
  }

  std::vector<Eqn> replaced(g_.eqns.size());  // per first equation: the fused one
  std::vector<bool> drop(g_.eqns.size(), false);
  int fused = 0;
  for (std::size_t k = 0; k < clusters.size(); ++k) {
    build(clusters[k], reductions[k], axes[k], replaced, drop);
    fused += replaced[clusters[k].first].prim != nullptr ? 1 : 0;
  }
  if (fused == 0) return 0;
  // A kept comparison that was its cluster's first stays there, ahead of the fused equation.
  std::vector<Eqn> eqns;
  for (std::size_t i = 0; i < g_.eqns.size(); ++i) {
    if (!drop[i]) eqns.push_back(std::move(g_.eqns[i]));
    if (replaced[i].prim != nullptr) eqns.push_back(std::move(replaced[i]));
  }
  g_.eqns = std::move(eqns);
  return fused;
}

void Fuser::build(const Cluster& c, const std::vector<std::size_t>& reductions, int axes,
                  std::vector<Eqn>& replaced, std::vector<bool>& drop) {
  std::vector<bool> member(g_.eqns.size(), false);
  for (const std::size_t i : c.eqns)
    member[i] = true;
  for (const std::size_t r : reductions)
    member[r] = true;  // its operand need not be a result for it
  const auto read_outside = [&](VarId v) {
    const auto& readers = uses_.readers[static_cast<std::size_t>(v)];
    return uses_.output[static_cast<std::size_t>(v)] ||
           std::any_of(readers.begin(), readers.end(), [&](std::size_t k) { return !member[k]; });
  };
  // A comparison whose bool is also read outside stays an equation of its own too (a program
  // has results of its dtype only); the cluster computes it again as 1 or 0.
  std::vector<bool> kept(g_.eqns.size(), false);
  for (const std::size_t i : c.eqns)
    if (g_.aval(g_.eqns[i].outputs[0]).dtype == DType::bool_ && read_outside(g_.eqns[i].outputs[0]))
      kept[i] = true;
  for (const std::size_t i : c.eqns)
    if (kept[i]) member[i] = false;
  // The cluster's results: values read outside it (kept comparisons included) or by the graph.
  std::vector<VarId> outputs;
  for (const std::size_t i : c.eqns) {
    const VarId v = g_.eqns[i].outputs[0];
    if (!kept[i] && g_.aval(v).dtype != DType::bool_ && read_outside(v)) outputs.push_back(v);
  }
  if (outputs.empty() && reductions.empty()) return;

  ElementwiseBuilder b;
  std::map<VarId, EValue> value;
  std::map<std::pair<VarId, std::int64_t>, EValue> broadcast_value;  // by (array, inner)
  std::vector<Atom> scalars, inputs;
  bool floating_input = false;
  std::vector<VarId> absorbed;  // broadcasts the program reads through
  // What operand `given` is read as; a broadcast only after an operand read element by
  // element (the program's operand 0, which gives it its shape).
  const auto read_of = [&](const Atom& given) {
    Read read = through_broadcast(given);
    if (read.inner > 0 && inputs.empty()) read = {given};
    return read;
  };
  // An operand's value: computed in the cluster, or read (a bool from memory as a mask).
  const auto operand = [&](const Atom& given, bool bool_value = false) -> EValue {
    if (!given.is_literal())
      if (const auto it = value.find(given.var); it != value.end()) return it->second;
    const Read read = read_of(given);
    const Atom& a = read.atom;
    if (!given.is_literal() && (a.is_literal() || a.var != given.var) &&
        std::find(absorbed.begin(), absorbed.end(), given.var) == absorbed.end())
      absorbed.push_back(given.var);
    if (a.is_literal()) return b.constant(literal_value(a.literal));
    if (read.inner > 0) {
      const std::pair key{a.var, read.inner};
      if (const auto it = broadcast_value.find(key); it != broadcast_value.end()) return it->second;
      const EValue v = b.broadcast_input(read.inner, bool_value);
      inputs.push_back(a);
      floating_input = floating_input || !bool_value;
      broadcast_value.emplace(key, v);
      return v;
    }
    if (const auto it = value.find(a.var); it != value.end()) return it->second;
    const bool scalar = g_.aval(a.var).shape.rank() == 0 && c.aval.shape.rank() != 0;
    const EValue v = scalar ? b.scalar() : bool_value ? b.mask_input() : b.input();
    (scalar ? scalars : inputs).push_back(a);
    floating_input = floating_input || (!scalar && !bool_value);
    value.emplace(a.var, v);
    return v;
  };
  // Whether input `j` of equation `e` is a bool the program reads as 1 or 0.
  const auto reads_bool = [&](const Eqn& e, std::size_t j) {
    return j == 0 && (e.prim == &lax::select_n_p || e.prim == &lax::convert_element_type_p);
  };
  // The first operand read element by element becomes operand 0, ahead of any broadcast.
  std::vector<bool> made_here(g_.num_vars(), false);
  for (const std::size_t i : c.eqns)
    made_here[static_cast<std::size_t>(g_.eqns[i].outputs[0])] = true;
  const auto first_elementwise = [&]() -> std::optional<std::pair<Atom, bool>> {
    for (const std::size_t i : c.eqns) {
      const Eqn& e = g_.eqns[i];
      for (std::size_t j = 0; j < e.inputs.size(); ++j) {
        const Atom& x = e.inputs[j];
        if (x.is_literal() || made_here[static_cast<std::size_t>(x.var)]) continue;
        const Read read = through_broadcast(x);
        if (!read.atom.is_literal() && read.inner == 0 &&
            g_.aval(read.atom.var).shape == c.aval.shape)
          return std::pair{x, reads_bool(e, j)};
      }
    }
    return std::nullopt;
  }();
  if (first_elementwise) (void)operand(first_elementwise->first, first_elementwise->second);
  for (const std::size_t i : c.eqns) {
    const Eqn& e = g_.eqns[i];
    EValue out;
    if (e.prim == &lax::select_n_p) {
      // select_n picks case1 where `which` is true.
      out = select(operand(e.inputs[0], true), operand(e.inputs[2]), operand(e.inputs[1]));
    } else if (e.prim == &lax::convert_element_type_p) {
      out = operand(e.inputs[0], true);
    } else {
      const Op op = *op_of(e.prim);
      const EValue x = operand(e.inputs[0]);
      if (op == Op::integer_pow) {
        out = b.apply(op, x, {}, {}, static_cast<std::int32_t>(e.params.get<std::int64_t>("y")));
      } else if (ElementwiseProgram::arity(op) == 1) {
        out = b.apply(op, x);
      } else {
        out = b.apply(op, x, operand(e.inputs[1]));
      }
    }
    value[e.outputs[0]] = out;
  }
  // A program needs a per-array operand for its shape, and a floating one for its dtype.
  if (inputs.empty() || (!floating_input && scalars.empty())) return;
  // Broadcasts the program reads through that nothing else reads: they go with the cluster.
  const auto dropped = static_cast<std::int64_t>(
      std::count_if(absorbed.begin(), absorbed.end(), [&](VarId v) { return !read_outside(v); }));
  const auto replaced_eqns =
      static_cast<std::int64_t>(c.eqns.size()) - std::count(kept.begin(), kept.end(), true);
  // Every row reduction's operand is a value of the program (a member's result or an operand
  // a member reads).
  for (const std::size_t r : reductions)
    FLAXPP_ASSERT(value.count(g_.eqns[r].inputs[0].var) == 1,
                  "fuse_elementwise: a row reduction's operand is not the program's");
  const auto reduced = static_cast<std::int64_t>(reductions.size());
  // One equation alone is worth a program only when it reads a broadcast through (relu's
  // backward select and its zeros, which go once every reader of them is fused).
  if (replaced_eqns + reduced < 2 && absorbed.empty()) return;
  for (const VarId v : outputs)
    b.output(value.at(v));
  for (const std::size_t r : reductions) {
    const Eqn& e = g_.eqns[r];
    b.reduce_rows(e.prim == &lax::reduce_sum_p ? Op::add : Op::max, value.at(e.inputs[0].var),
                  axes);
    outputs.push_back(e.outputs[0]);
  }
  std::shared_ptr<const ElementwiseProgram> program;
  try {
    program = b.finish();
  } catch (const ValueError&) {  // more registers than a program may have: left unfused
    return;
  }
  Eqn f{&lax::fused_elementwise_p, scalars, outputs, {}};
  f.inputs.insert(f.inputs.end(), inputs.begin(), inputs.end());
  f.params.set("program", std::move(program));
  f.params.set("donate", true);
  f.params.set("fused_eqns", replaced_eqns + dropped + reduced);
  replaced[c.first] = std::move(f);
  for (const std::size_t i : c.eqns)
    drop[i] = !kept[i];
  for (const std::size_t r : reductions)
    drop[r] = true;
}

}  // namespace

int fuse_elementwise(Graph& graph, FusionOptions options) {
  return Fuser(graph, options).run();
}

OpCounts op_counts(const Graph& graph) {
  OpCounts n;
  for (const Eqn& e : graph.eqns) {
    ++n.executed;
    n.unfused += e.params.has("fused_eqns") ? e.params.get<std::int64_t>("fused_eqns") : 1;
    for_each_subgraph(e, [&](const std::string&, const Graph& sub) {
      const OpCounts inner = op_counts(sub);
      n.executed += inner.executed;
      n.unfused += inner.unfused;
    });
  }
  return n;
}

}  // namespace flaxpp::ir
