// analyze_memory: eval_graph's run simulated on byte counts.
#include "flaxpp/transforms/memory_analysis.hpp"

#include <algorithm>
#include <map>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "flaxpp/transforms/buffer_assignment.hpp"

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
                     alias_bytes, " B, temporaries ", temp_bytes, " B, constants ", constant_bytes,
                     " B, peak ", peak_bytes, " B", exact ? "" : " (at least)");
}

void count_constants(MemoryAnalysis& m, const ir::Graph& graph) {
  const std::int64_t bytes = ir::constant_bytes(graph);
  m.peak_bytes += bytes - m.constant_bytes;
  m.constant_bytes = bytes;
}

namespace {

// eval_graph's run followed on byte counts: the analysis, and the buffers it makes and frees.
struct Run {
  MemoryAnalysis m;
  std::vector<std::int64_t> peak_at;  // per equation: the most held while it runs
  std::vector<bool> loop_at;          // per equation: it runs graphs or has a memory model
  std::vector<ir::VarId> buffer_of;   // per variable (BufferAssignment::buffer_of)
  // The buffers an arena may hold: made by an equation that only computes its results,
  // holding no result of the run, read by no collective, copy to another memory kind or loop.
  std::vector<BufferLife> placeable;
};

// An equation whose operands and results stay where they are: a collective (its exchange may
// hold them in flight), a copy to another memory kind (asynchronous on a GPU), an equation that
// runs graphs (which may hand an operand's memory out as a result).
bool pins_buffers(const ir::Eqn& e) {
  const ir::Effects& effects = ir::effects_of(*e.prim);
  bool holds_graphs = false;
  ir::for_each_subgraph(e, [&](const auto& /*name*/, const ir::Graph&) { holds_graphs = true; });
  return effects.collective || effects.async_half || holds_graphs || e.params.has("memory_kind");
}

Run follow_run(const ir::Graph& graph, const std::vector<bool>& donated,
               const std::vector<bool>& placed) {
  FLAXPP_ASSERT(donated.size() == graph.invars.size(), "analyze_memory: ", donated.size(),
                " donation flags for ", graph.invars.size(), " inputs");
  const std::size_t num_vars = graph.num_vars();
  const auto n = static_cast<std::ptrdiff_t>(graph.eqns.size());
  // A result its caller asked for where it put it (`placed`), made there by an equation that
  // allocates it (decided at that equation): it holds none of the run's memory.
  std::vector<bool> asked(num_vars, false), in_callers(num_vars, false);
  for (std::size_t k = 0; k < placed.size(); ++k)
    if (placed[k] && !graph.outvars[k].is_literal())
      asked[static_cast<std::size_t>(graph.outvars[k].var)] = true;
  const auto bytes = [&](ir::VarId v) {
    return in_callers[static_cast<std::size_t>(v)] ? 0 : graph.aval(v).nbytes();
  };
  Run run;
  MemoryAnalysis& m = run.m;
  run.peak_at.assign(static_cast<std::size_t>(n), 0);
  run.loop_at.assign(static_cast<std::size_t>(n), false);
  run.buffer_of.resize(num_vars);
  for (std::size_t v = 0; v < num_vars; ++v)
    run.buffer_of[v] = static_cast<ir::VarId>(v);
  std::vector<ir::VarId>& buffer_of = run.buffer_of;
  // Per buffer (its first variable): when it is made and freed, whether an equation made it
  // for its results alone, and whether it must stay out of an arena.
  std::vector<std::ptrdiff_t> made_at(num_vars, -1);
  std::vector<std::ptrdiff_t> freed_at(num_vars, n);
  std::vector<bool> computed(num_vars, false);
  std::vector<bool> pinned(num_vars, false);

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
  std::vector<bool> pinned_var = is_output;  // resolved to buffers at the end
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
    std::int64_t& peak_here = run.peak_at[static_cast<std::size_t>(i)];
    if (pins_buffers(e)) {
      for (const ir::Atom& a : e.inputs)
        if (!a.is_literal()) pinned_var[static_cast<std::size_t>(a.var)] = true;
      for (const ir::VarId v : e.outputs)
        pinned_var[static_cast<std::size_t>(v)] = true;
    }
    for (const ir::VarId v : e.outputs)
      made_at[static_cast<std::size_t>(v)] = i;
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
    run.loop_at[static_cast<std::size_t>(i)] =
        memory_model != nullptr || largest >= 0 || call != nullptr || loop != nullptr;
    if (memory_model != nullptr) {
      const EqnMemory em = (*memory_model)(graph, e);
      m.exact = m.exact && em.exact;
      peak_here = live + em.peak;
      live += em.results;
    } else if (largest >= 0) {
      for (const ir::VarId v : e.outputs)
        made += bytes(v);
      m.exact = false;
      peak_here = live + largest;
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
      peak_here = live + extra;
      live += made;
    } else {
      // A collective without a memory model (dist's all_reduce has one): its own buffers, such
      // as a bucket's packing or what a started exchange holds, are not modelled.
      const ir::Effects& effects = ir::effects_of(*e.prim);
      if (effects.collective && (e.inputs.size() > 1 || effects.async_half)) m.exact = false;
      std::vector<int> from_operand(e.outputs.size(), -1);  // result -> operand whose buffer
      if (e.prim == &lax::fused_elementwise_p && e.params.has("donate") &&
          e.params.get<bool>("donate")) {
        const auto& program =
            *e.params.get<std::shared_ptr<const ir::ElementwiseProgram>>("program");
        const auto scalars = static_cast<std::size_t>(program.num_scalars);
        const auto per_group = static_cast<std::size_t>(program.num_inputs);
        const std::size_t per_result = program.results_per_group();
        for (std::size_t g = 0; scalars + g * per_group < e.inputs.size(); ++g) {
          std::vector<bool> free(per_group);
          for (std::size_t j = 0; j < per_group; ++j)
            free[j] = unshared(e.inputs[scalars + g * per_group + j]);
          const std::vector<int> from = program.donations(free);  // the outputs' (not rows')
          for (std::size_t k = 0; k < from.size(); ++k)
            if (from[k] >= 0) {
              const std::size_t op = scalars + g * per_group + static_cast<std::size_t>(from[k]);
              from_operand[g * per_result + k] = static_cast<int>(op);
              taken_operand[op] = true;
            }
        }
      }
      for (std::size_t k = 0; k < e.outputs.size(); ++k) {
        const auto v = static_cast<std::size_t>(e.outputs[k]);
        in_callers[v] = asked[v] && from_operand[k] < 0 && !pins_buffers(e);
        if (const int op = from_operand[k]; op >= 0) {
          const auto from = static_cast<std::size_t>(e.inputs[static_cast<std::size_t>(op)].var);
          origin[v] = origin[from];
          buffer_of[v] = buffer_of[from];
        } else {
          made += bytes(e.outputs[k]);
          computed[v] = true;
        }
      }
      live += made;
      peak_here = live;
    }
    m.peak_bytes = std::max(m.peak_bytes, peak_here);
    // Results nothing reads are dropped at once; operands read for the last time are freed
    // unless a result took their buffer.
    for (const ir::VarId v : e.outputs)
      if (last_use[static_cast<std::size_t>(v)] < 0) {
        live -= bytes(v);
        freed_at[static_cast<std::size_t>(buffer_of[static_cast<std::size_t>(v)])] = i;
      }
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
      freed_at[static_cast<std::size_t>(buffer_of[v])] = i;
      freed.push_back(a.var);
    }
  }
  for (std::size_t v = 0; v < num_vars; ++v)
    if (pinned_var[v]) pinned[static_cast<std::size_t>(buffer_of[v])] = true;
  for (std::size_t v = 0; v < num_vars; ++v)
    if (computed[v] && !pinned[v] && bytes(static_cast<ir::VarId>(v)) > 0)
      run.placeable.push_back(
          {static_cast<ir::VarId>(v), bytes(static_cast<ir::VarId>(v)), made_at[v], freed_at[v]});

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
    m.placed_outputs.push_back(!a.is_literal() && in_callers[static_cast<std::size_t>(a.var)]);
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
  return run;
}

void count_temporaries(MemoryAnalysis& m) {
  m.temp_bytes = std::max<std::int64_t>(
      0, m.peak_bytes - m.argument_bytes - m.output_bytes + m.alias_bytes - m.constant_bytes);
}

}  // namespace

MemoryAnalysis analyze_memory(const ir::Graph& graph, const std::vector<bool>& donated) {
  Run run = follow_run(graph, donated, {});
  count_temporaries(run.m);
  return std::move(run.m);
}

namespace {

// A buffer assignment of `run` and its peak: each group of buffers in an arena of its own
// (their offsets in `offset`), the rest of the run as it is.
struct Placement {
  std::vector<PlannedArena> arenas;
  std::vector<std::int64_t> offset;
  std::int64_t peak = 0;
};

Placement place(const Run& run, const std::vector<std::vector<BufferLife>>& groups,
                std::size_t num_vars) {
  Placement p;
  p.offset.assign(num_vars, -1);
  const std::size_t n = run.peak_at.size();
  std::vector<std::int64_t> placed(n + 2, 0);  // per equation, by differences
  std::vector<std::int64_t> arena(n + 2, 0);
  for (const std::vector<BufferLife>& group : groups) {
    if (group.empty()) continue;
    const PlannedArena a = assign_offsets(group, p.offset);
    p.arenas.push_back(a);
    arena[static_cast<std::size_t>(a.first)] += a.bytes;
    arena[static_cast<std::size_t>(a.last) + 1] -= a.bytes;
    for (const BufferLife& b : group) {
      placed[static_cast<std::size_t>(b.first)] += b.bytes;
      placed[static_cast<std::size_t>(b.last) + 1] -= b.bytes;
    }
  }
  p.peak = run.m.argument_bytes;
  std::int64_t held = 0;
  std::int64_t arenas = 0;
  for (std::size_t i = 0; i < n; ++i) {
    held += placed[i];
    arenas += arena[i];
    p.peak = std::max(p.peak, run.peak_at[i] - held + arenas);
  }
  return p;
}

}  // namespace

MemoryAnalysis plan_memory(const ir::Graph& graph, const std::vector<bool>& donated,
                           const std::vector<bool>& placed) {
  Run run = follow_run(graph, donated, placed);
  // One arena for the whole run, or one between each two loops, the values held across a loop
  // kept apart: whichever peaks lower (one arena on a tie).
  Placement best = place(run, {run.placeable}, graph.num_vars());
  std::vector<std::ptrdiff_t> loops_before(run.loop_at.size() + 1, 0);
  for (std::size_t i = 0; i < run.loop_at.size(); ++i)
    loops_before[i + 1] = loops_before[i] + (run.loop_at[i] ? 1 : 0);
  if (loops_before.back() > 0) {
    std::vector<std::vector<BufferLife>> between(static_cast<std::size_t>(loops_before.back()) + 1);
    for (const BufferLife& b : run.placeable) {
      const std::ptrdiff_t segment = loops_before[static_cast<std::size_t>(b.first)];
      if (loops_before[static_cast<std::size_t>(b.last)] == segment)
        between[static_cast<std::size_t>(segment)].push_back(b);
    }
    if (Placement split = place(run, between, graph.num_vars()); split.peak < best.peak)
      best = std::move(split);
  }
  MemoryAnalysis& m = run.m;
  m.peak_bytes = best.peak;
  m.buffers.arenas = std::move(best.arenas);
  m.buffers.offset = std::move(best.offset);
  m.buffers.buffer_of = std::move(run.buffer_of);
  count_temporaries(m);
  return std::move(m);
}

}  // namespace flaxpp
