// saved_residuals and print_saved_residuals: what the forward graph of vjp(f) hands to the
// backward graph, described as jax.ad_checkpoint.saved_residuals describes it.
#include <algorithm>
#include <unordered_map>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "transforms/linearize.hpp"

namespace flaxpp {

std::vector<SavedResidual> saved_residuals(const ArrayFn& f, std::span<const Array> args) {
  std::vector<AVal> avals;
  for (const Array& a : args)
    avals.push_back(a.aval());
  const Linearized lin = linearize(f, avals, {});
  const ir::Graph& known = lin.pe.known;
  std::unordered_map<ir::VarId, const ir::Eqn*> producer;
  for (const ir::Eqn& e : known.eqns)
    for (ir::VarId v : e.outputs)
      producer[v] = &e;
  std::vector<SavedResidual> out;
  // Constants the backward pass reads (e.g. arrays the function captured), as JAX lists them.
  for (const Array& c : lin.pe.unknown.consts) {
    SavedResidual r;
    r.aval = c.aval();
    r.kind = SavedResidual::Kind::constant;
    out.push_back(std::move(r));
  }
  const std::size_t first = known.outvars.size() - lin.pe.num_residuals;
  for (std::size_t k = first; k < known.outvars.size(); ++k) {
    const ir::Atom& a = known.outvars[k];
    SavedResidual r;
    r.aval = known.aval(a);
    if (a.is_literal()) {
      r.kind = SavedResidual::Kind::literal;
    } else if (const auto it = std::find(known.invars.begin(), known.invars.end(), a.var);
               it != known.invars.end()) {
      r.kind = SavedResidual::Kind::argument;
      r.argument = static_cast<int>(it - known.invars.begin());
    } else if (std::find(known.constvars.begin(), known.constvars.end(), a.var) !=
               known.constvars.end()) {
      r.kind = SavedResidual::Kind::constant;
    } else {
      const ir::Eqn* e = producer.at(a.var);
      r.kind = SavedResidual::Kind::output;
      r.primitive = e->prim->name();
      if (e->prim == &lax::name_p) {
        r.kind = SavedResidual::Kind::named;
        r.name = e->params.get<std::string>("name");
      }
      if (e->prim == &device_put_p)
        r.memory_kind = memory_kind_from_name(e->params.get<std::string>("memory_kind"));
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string SavedResidual::str(std::span<const std::string> arg_names) const {
  std::string aval_text = aval.str();
  if (memory_kind == MemoryKind::pinned_host)  // JAX: f32<host>[5,4]
    aval_text = detail::str(dtype_short_name(aval.dtype), "<host>", aval.shape);
  switch (kind) {
    case Kind::literal:
      return aval_text + " from a literal";
    case Kind::constant:
      return aval_text + " from a constant";
    case Kind::argument:
      return static_cast<std::size_t>(argument) < arg_names.size()
                 ? detail::str(aval_text, " from the argument ",
                               arg_names[static_cast<std::size_t>(argument)])
                 : detail::str(aval_text, " from the argument at flattened index ", argument);
    case Kind::named:
      return detail::str(aval_text, " named '", name, "'");
    case Kind::output:
      return detail::str(aval_text, " output of ", primitive);
  }
  return aval_text;
}

void print_saved_residuals(const ArrayFn& f, std::span<const Array> args,
                           std::span<const std::string> arg_names, std::ostream& os) {
  for (const SavedResidual& r : saved_residuals(f, args))
    os << r.str(arg_names) << "\n";
}

}  // namespace flaxpp
