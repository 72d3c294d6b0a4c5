// flaxpp/ir/graph.hpp — Graph: a closed, jaxpr-like program: typed variables, constants,
// inputs, a list of equations (primitive, input atoms, output variables, params) and outputs.
// A printer shows it in jaxpr text; verify() checks it after every transform in tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/aval.hpp"
#include "flaxpp/ir/params.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::ir {

using VarId = std::int32_t;

// An equation input: a variable, or a literal (a concrete 0-d array inlined in the graph).
struct Atom {
  VarId var = -1;
  Array literal;

  static Atom of(VarId v) { return {v, Array()}; }
  static Atom lit(Array value) { return {-1, std::move(value)}; }
  bool is_literal() const { return var < 0; }
};

struct Eqn {
  const Primitive* prim = nullptr;
  std::vector<Atom> inputs;
  std::vector<VarId> outputs;
  Params params;
};

class Graph {
 public:
  // Adds a variable of the given aval and returns its id.
  VarId new_var(AVal aval);
  const AVal& aval(VarId v) const { return vars_.at(static_cast<std::size_t>(v)); }
  AVal aval(const Atom& a) const { return a.is_literal() ? a.literal.aval() : aval(a.var); }
  std::size_t num_vars() const { return vars_.size(); }
  // The avals of an equation's operands and results.
  std::vector<AVal> input_avals(const Eqn& e) const;
  std::vector<AVal> output_avals(const Eqn& e) const;

  // Constants: variables bound to fixed arrays (concrete, or tracers of an outer trace).
  std::vector<VarId> constvars;
  std::vector<Array> consts;
  std::vector<VarId> invars;
  std::vector<Atom> outvars;
  std::vector<Eqn> eqns;

  // jaxpr-style text: { lambda consts ; invars . let eqns in (outvars) }
  std::string str(int indent = 0) const;
  // Checks that every variable is defined once before use, avals agree with the shape rules
  // and consts match their variables; throws FLAXPP_ASSERT-style internal errors otherwise.
  void verify() const;

 private:
  std::vector<AVal> vars_;
};

// Calls f(name, sub-graph) for each sub-graph an equation holds in its params (a
// checkpoint's body, ...).
template <class F>
void for_each_subgraph(const Eqn& e, F&& f) {
  for (const auto& [name, value] : e.params.items())
    if (const auto* sub = std::get_if<std::shared_ptr<const Graph>>(&value); sub && *sub)
      f(name, **sub);
}

// Number of equations of primitive `prim` (recursing into sub-graphs held in params).
std::int64_t count_eqns(const Graph& graph, const Primitive& prim);

// The bytes of `graph`'s concrete constants and literals (recursing into sub-graphs held in
// params), each buffer once: memory the graph holds as long as it lives, live during each of
// its runs.
std::int64_t constant_bytes(const Graph& graph);

// `graph` with its concrete constants and literals copied to `device` (recursing into
// sub-graphs held in params): evaluated there, it then copies nothing from the host (which a
// GPU computation would do for every host constant at every call, and which a CUDA graph
// recording cannot hold).
Graph with_constants_on(const Graph& graph, Device device);

}  // namespace flaxpp::ir
