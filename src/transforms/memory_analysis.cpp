// analyze_memory: eval_graph's run simulated on byte counts.
#include "flaxpp/transforms/memory_analysis.hpp"

#include <algorithm>
#include <map>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/primitive_rules.hpp"

namespace flaxpp {
namespace {

std::map<const ir::Primitive*, MemoryModel>& memory_models() {
  static std::map<const ir::Primitive*, MemoryModel> models;
  return models;
}

}  // namespace

void register_memory_model(const ir::Primitive& prim, MemoryModel model) {
  memory_models()[&prim] = std::move(model);
}

std::string MemoryAnalysis::str() const {
  return detail::str("arguments ", argument_bytes, " B, outputs ", output_bytes, " B, aliased ",
                     alias_bytes, " B, temporaries ", temp_bytes, " B, peak ", peak_bytes, " B",
                     exact ? "" : " (at least)");
}

MemoryAnalysis analyze_memory(const ir::Graph& graph, const std::vector<bool>& donated) {
  FLAXPP_ASSERT(donated.size() == graph.invars.size(), "analyze_memory: ", donated.size(),
                " donation flags for ", graph.invars.size(), " inputs");
  const std::size_t num_vars = graph.num_vars();
  const auto n = static_cast<std::ptrdiff_t>(graph.eqns.size());
  const auto bytes = [&](ir::VarId v) { return graph.aval(v).nbytes(); };
  MemoryAnalysis m;

  // eval_graph's bookkeeping: the last reader of each variable (n for results).
  std::vector<std::ptrdiff_t> last_use(num_vars, -1);
  for (std::ptrdiff_t i = 0; i < n; ++i)
    for (const ir::Atom& a : graph.eqns[static_cast<std::size_t>(i)].inputs)
      if (!a.is_literal()) last_use[static_cast<std::size_t>(a.var)] = i;
  std::vector<bool> is_output(num_vars, false);
  for (const ir::Atom& a : graph.outvars)
    if (!a.is_literal()) {
      last_use[static_cast<std::size_t>(a.var)] = n;
      is_output[static_cast<std::size_t>(a.var)] = true;
    }
  // Which values the run may free or write into: its own, and donated inputs.
  std::vector<bool> owned(num_vars, true);
  for (const ir::VarId v : graph.constvars)
    owned[static_cast<std::size_t>(v)] = false;
  // origin[v]: the input whose buffer v holds (-1: a buffer of the run's own).
  std::vector<std::ptrdiff_t> origin(num_vars, -1);
  std::vector<bool> counted(num_vars, false);
  std::int64_t live = 0;
  for (std::size_t i = 0; i < graph.invars.size(); ++i) {
    const auto v = static_cast<std::size_t>(graph.invars[i]);
    owned[v] = donated[i];
    origin[v] = static_cast<std::ptrdiff_t>(i);
    if (!counted[v]) live += bytes(graph.invars[i]);
    counted[v] = true;
  }
  m.argument_bytes = live;
  m.peak_bytes = live;

  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const ir::Eqn& e = graph.eqns[static_cast<std::size_t>(i)];
    // Operands that are the run's alone when the equation runs (it reads them last, once).
    const auto unshared = [&](const ir::Atom& a) {
      if (a.is_literal()) return false;
      const auto v = static_cast<std::size_t>(a.var);
      return owned[v] && last_use[v] == i &&
             std::count_if(e.inputs.begin(), e.inputs.end(), [&](const ir::Atom& b) {
               return !b.is_literal() && b.var == a.var;
             }) == 1;
    };
    std::vector<bool> taken_operand(e.inputs.size(), false);
    std::int64_t made = 0;  // new buffers of the results
    const auto model = memory_models().find(e.prim);
    const MemoryModel* memory_model = model == memory_models().end() ? nullptr : &model->second;
    const std::string* call = memory_model ? nullptr : ir::call_body(*e.prim);
    const std::string* loop = memory_model ? nullptr : ir::loop_body(*e.prim);
    // Any other equation that holds graphs (cond's branches) runs at most one of them at a
    // time: the largest one's peak bounds what it adds, so the figure is no longer exact.
    std::int64_t largest = -1;
    if (memory_model == nullptr && call == nullptr && loop == nullptr)
      ir::for_each_subgraph(e, [&](const auto& /*name*/, const ir::Graph& sub) {
        const MemoryAnalysis inner =
            analyze_memory(sub, std::vector<bool>(sub.invars.size(), false));
        largest = std::max(largest, inner.peak_bytes - inner.argument_bytes);
      });
    if (memory_model != nullptr) {
      const EqnMemory em = (*memory_model)(graph, e);
      m.exact = m.exact && em.exact;
      m.peak_bytes = std::max(m.peak_bytes, live + em.peak);
      live += em.results;
    } else if (largest >= 0) {
      for (const ir::VarId v : e.outputs)
        made += bytes(v);
      m.exact = false;
      m.peak_bytes = std::max(m.peak_bytes, live + largest);
      live += made;
    } else if (call != nullptr || loop != nullptr) {
      // The body runs on the equation's operands (held by it, so none is freed inside) and
      // its results become the equation's.
      const auto& body = *e.params.get<std::shared_ptr<const ir::Graph>>(call ? *call : *loop);
      const MemoryAnalysis inner =
          analyze_memory(body, std::vector<bool>(body.invars.size(), false));
      for (const ir::VarId v : e.outputs)
        made += bytes(v);
      std::int64_t extra = inner.peak_bytes - inner.argument_bytes;
      if (loop != nullptr) {
        // The stacked results exist from the first iteration on, beside one iteration's body.
        m.exact = false;
        extra += made;
      } else {
        m.exact = m.exact && inner.exact;
      }
      m.peak_bytes = std::max(m.peak_bytes, live + extra);
      live += made;
    } else {
      // A collective's own buffers are not modelled: a gradient bucket's packing (an
      // all_reduce of several arrays), the operands a started all_reduce holds.
      const ir::Effects& effects = ir::effects_of(*e.prim);
      if (effects.collective && (e.inputs.size() > 1 || effects.async_half)) m.exact = false;
      std::vector<int> from_operand(e.outputs.size(), -1);  // result -> operand whose buffer
      if (e.prim == &lax::fused_elementwise_p && e.params.has("donate") &&
          e.params.get<bool>("donate")) {
        const auto& program =
            *e.params.get<std::shared_ptr<const ir::ElementwiseProgram>>("program");
        const auto scalars = static_cast<std::size_t>(program.num_scalars);
        const auto per_group = static_cast<std::size_t>(program.num_inputs);
        const std::size_t per_output = program.outputs.size();
        for (std::size_t g = 0; scalars + g * per_group < e.inputs.size(); ++g) {
          std::vector<bool> free(per_group);
          for (std::size_t j = 0; j < per_group; ++j)
            free[j] = unshared(e.inputs[scalars + g * per_group + j]);
          const std::vector<int> from = program.donations(free);
          for (std::size_t k = 0; k < per_output; ++k)
            if (from[k] >= 0) {
              const std::size_t op = scalars + g * per_group + static_cast<std::size_t>(from[k]);
              from_operand[g * per_output + k] = static_cast<int>(op);
              taken_operand[op] = true;
            }
        }
      }
      for (std::size_t k = 0; k < e.outputs.size(); ++k) {
        const auto v = static_cast<std::size_t>(e.outputs[k]);
        if (const int op = from_operand[k]; op >= 0)
          origin[v] = origin[static_cast<std::size_t>(e.inputs[static_cast<std::size_t>(op)].var)];
        else
          made += bytes(e.outputs[k]);
      }
      live += made;
      m.peak_bytes = std::max(m.peak_bytes, live);
    }
    // Results nothing reads are dropped at once; operands read for the last time are freed
    // unless a result took their buffer.
    for (const ir::VarId v : e.outputs)
      if (last_use[static_cast<std::size_t>(v)] < 0) live -= bytes(v);
    // (A taken operand appears once, so skipping its slot skips the variable.)
    std::vector<ir::VarId> freed;
    for (std::size_t j = 0; j < e.inputs.size(); ++j) {
      const ir::Atom& a = e.inputs[j];
      if (a.is_literal() || taken_operand[j]) continue;
      const auto v = static_cast<std::size_t>(a.var);
      if (!owned[v] || last_use[v] != i ||
          std::find(freed.begin(), freed.end(), a.var) != freed.end())
        continue;
      live -= bytes(a.var);
      freed.push_back(a.var);
    }
  }

  // Held at the end: the arguments the caller keeps, and the results' buffers not among them
  // (an input's buffer, passed through or donated, once).
  std::vector<bool> held(num_vars, false);
  for (const ir::VarId v : graph.invars)
    if (!owned[static_cast<std::size_t>(v)] && !held[static_cast<std::size_t>(v)]) {
      held[static_cast<std::size_t>(v)] = true;
      m.end_bytes += bytes(v);
    }
  std::vector<bool> seen(num_vars, false);
  for (std::size_t k = 0; k < graph.outvars.size(); ++k) {
    const ir::Atom& a = graph.outvars[k];
    m.output_origin.push_back(a.is_literal() ? -1 : origin[static_cast<std::size_t>(a.var)]);
    if (a.is_literal()) continue;
    const auto v = static_cast<std::size_t>(a.var);
    if (seen[v]) continue;
    seen[v] = true;
    const std::ptrdiff_t from = origin[v];
    const std::size_t buffer =
        from < 0 ? v : static_cast<std::size_t>(graph.invars[static_cast<std::size_t>(from)]);
    if (!held[buffer]) m.end_bytes += bytes(a.var);
    held[buffer] = true;
    m.output_bytes += bytes(a.var);
    if (origin[v] >= 0 && donated[static_cast<std::size_t>(origin[v])]) {
      m.alias_bytes += bytes(a.var);
      m.aliases.emplace_back(static_cast<std::size_t>(origin[v]), k);
    }
  }
  m.temp_bytes =
      std::max<std::int64_t>(0, m.peak_bytes - m.argument_bytes - m.output_bytes + m.alias_bytes);
  return m;
}

}  // namespace flaxpp
