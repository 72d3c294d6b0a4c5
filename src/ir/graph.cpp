// Graph: variable bookkeeping, the jaxpr-style printer and the verifier.
#include "flaxpp/ir/graph.hpp"

#include <iomanip>
#include <memory>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace flaxpp::ir {
namespace {

// JAX's variable names: a..z, ba, bb, ...
std::string var_name(VarId v) {
  std::string s;
  auto n = static_cast<std::uint32_t>(v);
  do {
    s.insert(s.begin(), static_cast<char>('a' + n % 26));
    n /= 26;
  } while (n != 0);
  return s;
}

std::string literal_str(const Array& a) {
  std::ostringstream os;
  const Array host = a.to(Device::cpu());
  visit_host_dtype(a.dtype(), "print literal", [&]<class T>(TypeTag<T>) {
    const T v = host.host_span<T>()[0];
    if constexpr (std::is_floating_point_v<T>) {
      os << std::setprecision(std::is_same_v<T, float> ? 9 : 17) << v;
      if (v == static_cast<T>(static_cast<std::int64_t>(v)) && std::abs(v) < 1e15) os << ".0";
    } else if constexpr (std::is_same_v<T, std::uint8_t>) {
      os << (v ? "True" : "False");
    } else {
      os << v;
    }
  });
  return os.str() + ":" + a.aval().str();
}

std::string atom_str(const Atom& a) {
  return a.is_literal() ? literal_str(a.literal) : var_name(a.var);
}

std::string typed(const Graph& g, VarId v) {
  return var_name(v) + ":" + g.aval(v).str();
}

}  // namespace

VarId Graph::new_var(AVal aval) {
  vars_.push_back(std::move(aval));
  return static_cast<VarId>(vars_.size() - 1);
}

std::vector<AVal> Graph::input_avals(const Eqn& e) const {
  std::vector<AVal> out;
  for (const Atom& a : e.inputs)
    out.push_back(aval(a));
  return out;
}

std::vector<AVal> Graph::output_avals(const Eqn& e) const {
  std::vector<AVal> out;
  for (const VarId v : e.outputs)
    out.push_back(aval(v));
  return out;
}

std::string Graph::str(int indent) const {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  std::ostringstream os;
  auto list = [&](const auto& items, const char* sep, auto&& fn) {
    for (std::size_t i = 0; i < items.size(); ++i)
      os << (i ? sep : "") << fn(items[i]);
  };
  auto typed_var = [&](VarId v) { return typed(*this, v); };
  os << "{ lambda ";
  list(constvars, " ", typed_var);
  os << "; ";
  list(invars, " ", typed_var);
  os << ". let\n";
  for (const Eqn& e : eqns) {
    os << pad << "    ";
    list(e.outputs, " ", typed_var);
    os << " = " << e.prim->name();
    if (!e.params.items().empty()) os << "[" << e.params.str() << "]";
    for (const Atom& a : e.inputs)
      os << " " << atom_str(a);
    os << "\n";
  }
  os << pad << "  in (";
  list(outvars, ", ", [](const Atom& a) { return atom_str(a); });
  os << (outvars.size() == 1 ? ",) }" : ") }");
  return os.str();
}

void Graph::verify() const {
  std::vector<bool> defined(vars_.size(), false);
  auto define = [&](VarId v, const char* what) {
    FLAXPP_ASSERT(v >= 0 && static_cast<std::size_t>(v) < vars_.size(), what, " variable ", v,
                  " out of range");
    FLAXPP_ASSERT(!defined[static_cast<std::size_t>(v)], what, " variable ", var_name(v),
                  " defined twice");
    defined[static_cast<std::size_t>(v)] = true;
  };
  auto use = [&](const Atom& a, const std::string& where) {
    if (a.is_literal()) {
      FLAXPP_ASSERT(a.literal.valid() && !a.literal.is_traced() && a.literal.rank() == 0,
                    "literal in ", where, " must be a concrete 0-d array");
      return;
    }
    FLAXPP_ASSERT(a.var >= 0 && static_cast<std::size_t>(a.var) < vars_.size() &&
                      defined[static_cast<std::size_t>(a.var)],
                  where, " uses variable ", a.var, " before it is defined");
  };
  FLAXPP_ASSERT(constvars.size() == consts.size(), "constvars and consts differ in length");
  for (std::size_t i = 0; i < constvars.size(); ++i) {
    define(constvars[i], "const");
    FLAXPP_ASSERT(consts[i].valid() && consts[i].aval() == aval(constvars[i]), "const ",
                  var_name(constvars[i]), " does not match its variable's aval");
  }
  for (VarId v : invars)
    define(v, "input");
  for (const Eqn& e : eqns) {
    FLAXPP_ASSERT(e.prim != nullptr, "equation without a primitive");
    std::vector<AVal> in;
    for (const Atom& a : e.inputs) {
      use(a, e.prim->name());
      in.push_back(aval(a));
    }
    const std::vector<AVal> out = e.prim->shape_rule(in, e.params);
    FLAXPP_ASSERT(out.size() == e.outputs.size(), e.prim->name(), ": ", e.outputs.size(),
                  " outputs, rule gives ", out.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      define(e.outputs[i], e.prim->name().c_str());
      FLAXPP_ASSERT(out[i] == aval(e.outputs[i]), e.prim->name(), " output ",
                    var_name(e.outputs[i]), " is ", aval(e.outputs[i]), " but the shape rule says ",
                    out[i]);
    }
    for_each_subgraph(e, [](const std::string&, const Graph& sub) { sub.verify(); });
  }
  for (const Atom& a : outvars)
    use(a, "outputs");
}

std::int64_t count_eqns(const Graph& graph, const Primitive& prim) {
  std::int64_t n = 0;
  for (const Eqn& e : graph.eqns) {
    n += e.prim == &prim ? 1 : 0;
    for_each_subgraph(e, [&](const std::string&, const Graph& sub) { n += count_eqns(sub, prim); });
  }
  return n;
}

namespace {

void add_constants(const Graph& graph, std::unordered_set<const Buffer*>& seen,
                   std::int64_t& bytes) {
  const auto add = [&](const Array& a) {
    if (a.valid() && !a.is_traced() && seen.insert(&a.buffer()).second) bytes += a.nbytes();
  };
  for (const Array& c : graph.consts)
    add(c);
  for (const Atom& a : graph.outvars)
    add(a.literal);
  for (const Eqn& e : graph.eqns) {
    for (const Atom& a : e.inputs)
      add(a.literal);
    for_each_subgraph(
        e, [&](const std::string&, const Graph& sub) { add_constants(sub, seen, bytes); });
  }
}

}  // namespace

std::int64_t constant_bytes(const Graph& graph) {
  std::unordered_set<const Buffer*> seen;
  std::int64_t bytes = 0;
  add_constants(graph, seen, bytes);
  return bytes;
}

namespace {

// with_constants_on's walk: each host buffer and each sub-graph is moved once, however often
// it appears.
struct Placer {
  Device device;
  std::unordered_map<const void*, Array> arrays;
  std::unordered_map<const Graph*, std::shared_ptr<const Graph>> graphs;

  void place(Array& a) {
    if (!a.valid() || a.is_traced() || a.device() == device) return;
    Array& moved = arrays[a.buffer().data()];
    if (!moved.valid()) moved = a.to(device);
    a = moved;
  }
  Graph graph(const Graph& in) {
    Graph g = in;
    for (Array& c : g.consts)
      place(c);
    for (Atom& a : g.outvars)
      place(a.literal);
    for (std::size_t i = 0; i < g.eqns.size(); ++i) {
      Eqn& e = g.eqns[i];
      for (Atom& a : e.inputs)
        place(a.literal);
      // Read from `in`, whose params this loop does not change.
      for_each_subgraph(in.eqns[i], [&](const std::string& name, const Graph& sub) {
        std::shared_ptr<const Graph>& moved = graphs[&sub];
        if (!moved) moved = std::make_shared<const Graph>(graph(sub));
        e.params.set(name, moved);
      });
    }
    return g;
  }
};

}  // namespace

Graph with_constants_on(const Graph& graph, Device device) {
  return Placer{device, {}, {}}.graph(graph);
}

}  // namespace flaxpp::ir
