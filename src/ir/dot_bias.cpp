// fuse_dot_bias: a dot_general whose one reader adds a bias broadcast along the product's rhs
// free axes becomes dot_general_bias, as XLA's GPU gemm rewriter hands cuBLASLt a bias
// epilogue. The activation after it stays in fuse_elementwise's programs: cuBLASLt's RELU
// epilogue gives 0 for NaN where jax.nn.relu gives NaN, and its GELU differs in the last bits
// (../shared/docs/cublaslt-epilogues.md).
#include <optional>
#include <vector>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "ir/def_use.hpp"

namespace flaxpp::ir {
namespace {

struct Match {
  std::size_t dot = 0, add = 0;
  Atom bias;
  bool drops_broadcast = false;  // the broadcast had no other reader
};

class DotBiasFuser {
 public:
  explicit DotBiasFuser(Graph& g) : g_(g), uses_(g) {}

  int run();

 private:
  // The dot_general at `i` with its bias add, if it has that form.
  std::optional<Match> match(std::size_t i) const;
  // Whether the dot_generals at `i` and `j` compute the same product (a forward product and
  // its recomputation in a remat'd backward pass, which cse keeps apart).
  bool twins(std::size_t i, std::size_t j) const;

  Graph& g_;
  DefUse uses_;
};

std::optional<Match> DotBiasFuser::match(std::size_t i) const {
  const Eqn& dot = g_.eqns[i];
  const auto& dn = dot.params.get<DotDimensionNumbers>("dimension_numbers");
  const VarId product = dot.outputs[0];
  const AVal out = g_.aval(product);
  // float32 or float64 operands and product (a bf16 product with float32 results is no
  // epilogue of this kind).
  if (!dn.lhs_batch.empty() || (out.dtype != DType::f32 && out.dtype != DType::f64) ||
      g_.aval(dot.inputs[0]).dtype != out.dtype)
    return {};
  const auto& readers = uses_.readers[static_cast<std::size_t>(product)];
  if (readers.size() != 1 || uses_.output[static_cast<std::size_t>(product)]) return {};
  const Eqn& add = g_.eqns[readers[0]];
  if (add.prim != &lax::add_p) return {};
  const Atom& other =
      add.inputs[add.inputs[0].is_literal() || add.inputs[0].var != product ? 0 : 1];
  if (other.is_literal() || other.var == product) return {};
  const std::ptrdiff_t b = uses_.producer[static_cast<std::size_t>(other.var)];
  if (b < 0 || g_.eqns[static_cast<std::size_t>(b)].prim != &lax::broadcast_in_dim_p) return {};
  const Eqn& broadcast = g_.eqns[static_cast<std::size_t>(b)];
  // The bias: the rhs free axes' shape, broadcast along the product's trailing axes.
  const Atom& bias = broadcast.inputs[0];
  const AVal bias_aval = g_.aval(bias);
  const auto free = static_cast<std::int64_t>(g_.aval(dot.inputs[1]).shape.rank()) -
                    static_cast<std::int64_t>(dn.rhs_contracting.size());
  const auto& dims = out.shape.dims();
  const Shape expected(std::vector<std::int64_t>(dims.end() - free, dims.end()));
  const auto& bdims = broadcast.params.get<std::vector<std::int64_t>>("broadcast_dimensions");
  std::vector<std::int64_t> trailing(static_cast<std::size_t>(free));
  for (std::int64_t k = 0; k < free; ++k)
    trailing[static_cast<std::size_t>(k)] = out.shape.rank() - free + k;
  if (bias_aval.dtype != out.dtype || bias_aval.shape != expected || bdims != trailing) return {};
  const bool drops = uses_.readers[static_cast<std::size_t>(other.var)].size() == 1 &&
                     !uses_.output[static_cast<std::size_t>(other.var)];
  return Match{i, readers[0], bias, drops};
}

bool DotBiasFuser::twins(std::size_t i, std::size_t j) const {
  const Eqn& a = g_.eqns[i];
  const Eqn& b = g_.eqns[j];
  const auto same = [](const Atom& x, const Atom& y) {
    return !x.is_literal() && !y.is_literal() && x.var == y.var;
  };
  return a.params == b.params && same(a.inputs[0], b.inputs[0]) && same(a.inputs[1], b.inputs[1]);
}

int DotBiasFuser::run() {
  std::vector<std::size_t> dots;
  for (std::size_t i = 0; i < g_.eqns.size(); ++i)
    if (g_.eqns[i].prim == &lax::dot_general_p) dots.push_back(i);
  std::vector<std::optional<Match>> matches;
  for (const std::size_t i : dots)
    matches.push_back(match(i));
  // A product and its recomputation take the same path or neither does, so that remat's
  // recompute gives the forward pass's bits on a GPU too (cuBLASLt may pick another
  // algorithm for the epilogue than cuBLAS for the plain product).
  for (std::size_t a = 0; a < dots.size(); ++a)
    for (std::size_t b = a + 1; b < dots.size(); ++b)
      if (matches[a].has_value() != matches[b].has_value() && twins(dots[a], dots[b]))
        matches[a] = matches[b] = std::nullopt;

  std::vector<bool> drop(g_.eqns.size(), false);
  std::vector<std::optional<Eqn>> replace(g_.eqns.size());
  int fused = 0;
  for (const std::optional<Match>& m : matches) {
    if (!m) continue;
    Eqn& dot = g_.eqns[m->dot];
    Eqn f{&lax::dot_general_bias_p,
          {dot.inputs[0], dot.inputs[1], m->bias},
          g_.eqns[m->add].outputs,
          dot.params};
    f.params.set("fused_eqns", std::int64_t{m->drops_broadcast ? 3 : 2});
    // It stands where the add stood: the bias exists by then, and the operands did already.
    replace[m->add] = std::move(f);
    drop[m->dot] = true;
    ++fused;
  }
  if (fused == 0) return 0;
  std::vector<Eqn> eqns;
  eqns.reserve(g_.eqns.size());
  for (std::size_t i = 0; i < g_.eqns.size(); ++i) {
    if (replace[i]) {
      eqns.push_back(std::move(*replace[i]));
    } else if (!drop[i]) {
      eqns.push_back(std::move(g_.eqns[i]));
    }
  }
  g_.eqns = std::move(eqns);
  dce(g_);  // the bias broadcasts nothing reads now
  return fused;
}

}  // namespace

int fuse_dot_bias(Graph& graph) {
  return DotBiasFuser(graph).run();
}

}  // namespace flaxpp::ir
