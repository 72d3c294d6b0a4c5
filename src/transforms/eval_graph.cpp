// eval_graph: running a graph, releasing each value after its last use, and handing outputs
// out as soon as they are final.
#include "flaxpp/transforms/eval_graph.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/ir/primitive.hpp"
#include "flaxpp/ir/primitive_rules.hpp"

namespace flaxpp {

std::vector<Array> eval_graph(const ir::Graph& graph, std::span<const Array> args) {
  return eval_graph(graph, std::vector<Array>(args.begin(), args.end()));
}

namespace {

// A planned run's arenas (BufferAssignment), one at a time: each held from its first equation to
// its last, it hands the equations' results their slots, and keeps every value where the plan
// put it.
class Arenas {
 public:
  // On `device`, where the run computes; result k of the graph goes into destinations[k]
  // where that has a buffer.
  Arenas(const BufferAssignment& plan, const ir::Graph& graph, Device device,
         std::span<const OutputDestination> destinations)
      : plan_(plan), graph_(graph), backend_(&backend(device)) {
    for (std::size_t k = 0; k < destinations.size(); ++k)
      if (destinations[k].buffer != nullptr)
        destination_.emplace(graph.outvars[k].var, destinations[k]);
  }

  // Before equation i: its results' slots, from a new arena at the first of one.
  std::optional<ArenaPlacement> place(std::ptrdiff_t i, const ir::Eqn& e) {
    if (next_ < plan_.arenas.size() && i == plan_.arenas[next_].first)
      memory_ = backend_->allocate(plan_.arenas[next_++].bytes);
    // Every result with a buffer of its own, in order (a result written into an operand
    // allocates nothing): one kept apart takes no slot, and its allocation none of another's.
    std::vector<ArenaPlacement::Slot> slots;
    bool any = memory_ != nullptr;
    for (const ir::VarId v : e.outputs) {
      if (plan_.buffer_of[static_cast<std::size_t>(v)] != v) continue;
      const std::int64_t bytes = graph_.aval(v).nbytes();
      if (const auto d = destination_.find(v); d != destination_.end()) {
        slots.push_back({d->second.offset, bytes, d->second.buffer});
        any = true;
      } else {
        slots.push_back({memory_ != nullptr ? plan_.offset_of(v) : -1, bytes});
      }
    }
    if (!any) return std::nullopt;
    return std::optional<ArenaPlacement>(std::in_place, *backend_, memory_, std::move(slots));
  }

  // The results `vars` of an equation, where the plan has them: moved into its slot when the
  // equation made one elsewhere (a primitive that hands out an operand, an allocation that took
  // another slot), or out of the arena when the plan keeps it apart (a result of the run, a
  // loop's row view). One out of place in the arena where another result moves in leaves it
  // first, so that no move writes over a value still to be moved.
  void settle(std::span<const ir::VarId> vars, std::vector<Array>& values) const {
    // A result with a destination elsewhere first goes there.
    for (std::size_t k = 0; !destination_.empty() && k < vars.size(); ++k) {
      const auto d = destination_.find(vars[k]);
      if (d == destination_.end() || values[k].is_traced() ||
          &values[k].buffer().backend() != backend_)
        continue;  // (one on another device: the caller copies it)
      const auto* want = static_cast<const std::byte*>(d->second.buffer->data()) + d->second.offset;
      if (values[k].buffer().data() == want) continue;
      std::shared_ptr<Buffer> slot =
          backend_->slot(d->second.buffer, d->second.offset, values[k].nbytes());
      backend_->copy(values[k].buffer(), *slot, values[k].nbytes());
      values[k] = Array(std::move(slot), values[k].shape(), values[k].dtype());
    }
    if (memory_ == nullptr) return;
    const auto* base = static_cast<const std::byte*>(memory_->data());
    const auto at = [&](const Array& value) -> std::int64_t {
      // Nothing to place: a traced value, or one on another device.
      if (value.is_traced() || !value.valid() || &value.buffer().backend() != backend_) return -2;
      const auto* data = static_cast<const std::byte*>(value.buffer().data());
      return data >= base && data < base + memory_->bytes() ? data - base : -1;
    };
    // Where each result is (-2: nothing to place, -1: apart) and where the plan has it; most
    // equations' results are where the plan has them already.
    std::vector<std::int64_t> now(vars.size()), want(vars.size());
    bool placed = true;
    for (std::size_t k = 0; k < vars.size(); ++k) {
      now[k] = at(values[k]);
      want[k] = plan_.offset_of(vars[k]);
      placed = placed && (now[k] == -2 || now[k] == want[k] || (now[k] == -1 && want[k] < 0));
    }
    if (placed) return;
    const auto moves_in = [&](std::size_t k) {
      return want[k] >= 0 && now[k] != want[k] && now[k] != -2;
    };
    for (std::size_t k = 0; k < vars.size(); ++k) {
      if (now[k] < 0 || now[k] == want[k]) continue;
      const std::int64_t end = now[k] + values[k].nbytes();
      bool clobbered = false;  // another result moves in where this one is
      for (std::size_t j = 0; j < vars.size(); ++j)
        clobbered =
            clobbered || (moves_in(j) && now[k] < want[j] + values[j].nbytes() && want[j] < end);
      if (clobbered || want[k] < 0) {
        values[k] = values[k].copy();
        now[k] = -1;
      }
    }
    for (std::size_t k = 0; k < vars.size(); ++k) {
      if (!moves_in(k)) continue;
      Array& value = values[k];
      std::shared_ptr<Buffer> slot = backend_->slot(memory_, want[k], value.nbytes());
      backend_->copy(value.buffer(), *slot, value.nbytes());
      value = Array(std::move(slot), value.shape(), value.dtype());
    }
  }

  // After equation i: an arena goes with its last.
  void release(std::ptrdiff_t i) {
    if (next_ > 0 && i == plan_.arenas[next_ - 1].last) memory_.reset();
  }

 private:
  const BufferAssignment& plan_;
  const ir::Graph& graph_;
  Backend* backend_;
  std::size_t next_ = 0;            // the arena allocated next
  std::shared_ptr<Buffer> memory_;  // the one held, if any
  // The results' destinations, by variable.
  std::unordered_map<ir::VarId, OutputDestination> destination_;
};

// eval_graph's body; with a sink, outputs leave as soon as they are final; with a plan, the
// temporaries live in its arena.
std::vector<Array> run_graph(const ir::Graph& graph, std::vector<Array>&& args,
                             const OutputSink* sink, const BufferAssignment* plan,
                             std::span<const OutputDestination> destinations = {}) {
  if (args.size() != graph.invars.size())
    throw ValueError(detail::str("eval_graph: the graph takes ", graph.invars.size(),
                                 " inputs, got ", args.size()));
  const auto n = static_cast<std::ptrdiff_t>(graph.eqns.size());
  // last_use[v]: index of the last equation reading v; n for graph outputs kept to the end.
  std::vector<std::ptrdiff_t> last_use(graph.num_vars(), -1);
  for (std::ptrdiff_t i = 0; i < n; ++i)
    for (const ir::Atom& a : graph.eqns[static_cast<std::size_t>(i)].inputs)
      if (!a.is_literal()) last_use[static_cast<std::size_t>(a.var)] = i;
  // With a sink, output k leaves after equation ready[k] (-1: before the first): once its
  // variable is defined and read by no later equation.
  std::vector<std::vector<std::size_t>> ready;
  std::vector<int> pending;
  if (sink != nullptr) {
    ready.resize(static_cast<std::size_t>(n) + 1);
    pending.assign(graph.num_vars(), 0);
    std::vector<std::ptrdiff_t> defined(graph.num_vars(), -1);
    for (std::ptrdiff_t i = 0; i < n; ++i)
      for (const ir::VarId v : graph.eqns[static_cast<std::size_t>(i)].outputs)
        defined[static_cast<std::size_t>(v)] = i;
    for (std::size_t k = 0; k < graph.outvars.size(); ++k) {
      const ir::Atom& a = graph.outvars[k];
      std::ptrdiff_t at = -1;
      if (!a.is_literal()) {
        const auto v = static_cast<std::size_t>(a.var);
        at = std::max(defined[v], last_use[v]);
        ++pending[v];
      }
      ready[static_cast<std::size_t>(at + 1)].push_back(k);
    }
  }
  // Outputs stay in the environment until the end, or until they leave through the sink.
  for (const ir::Atom& a : graph.outvars)
    if (!a.is_literal()) last_use[static_cast<std::size_t>(a.var)] = n;

  std::vector<Array> env(graph.num_vars());
  for (std::size_t i = 0; i < graph.constvars.size(); ++i)
    env[static_cast<std::size_t>(graph.constvars[i])] = graph.consts[i];
  for (std::size_t i = 0; i < args.size(); ++i) {
    const AVal& want = graph.aval(graph.invars[i]);
    if (args[i].aval() != want)
      throw ValueError(
          detail::str("eval_graph: input ", i, " should be ", want, ", got ", args[i].aval()));
    env[static_cast<std::size_t>(graph.invars[i])] = std::move(args[i]);
  }
  // Hands out the outputs that became final; the environment lets go of a variable with its
  // last pending output, so the sink may own the only reference.
  std::vector<bool> delivered(sink != nullptr ? graph.outvars.size() : 0, false);
  auto deliver_one = [&](std::size_t k) {
    if (delivered[k]) return;
    delivered[k] = true;
    const ir::Atom& a = graph.outvars[k];
    if (a.is_literal()) {
      (*sink)(k, a.literal);
      return;
    }
    const auto v = static_cast<std::size_t>(a.var);
    (*sink)(k, --pending[v] == 0 ? std::move(env[v]) : env[v]);
  };
  auto deliver = [&](std::size_t bucket) {
    if (sink == nullptr) return;
    for (const std::size_t k : ready[bucket])
      deliver_one(k);
  };
  deliver(0);
  // A run under a trace records its equations: nothing to place. The arena goes where the run
  // computes: its arguments' device (the default device without arguments).
  std::optional<Arenas> arena;
  if (plan != nullptr && (!plan->empty() || !destinations.empty()) &&
      ir::current_trace() == nullptr) {
    Device device = default_device();
    for (const ir::VarId v : graph.invars)
      if (const Array& a = env[static_cast<std::size_t>(v)]; a.valid() && !a.is_traced()) {
        device = a.device();
        break;
      }
    arena.emplace(*plan, graph, device, destinations);
  }
  std::vector<Array> inputs;
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const ir::Eqn& e = graph.eqns[static_cast<std::size_t>(i)];
    if (sink != nullptr && ir::call_body(*e.prim) != nullptr && ir::current_trace() == nullptr) {
      // A call (a checkpoint region: a remat'd model's whole backward pass) runs inline, so
      // that its results leave one by one too: each is final when the body's graph says so.
      std::vector<Array> args_in;
      for (const ir::Atom& a : e.inputs)
        args_in.push_back(a.is_literal() ? a.literal : env[static_cast<std::size_t>(a.var)]);
      // The region's graph releases what it no longer needs only if it holds the sole
      // reference: let go of the values this equation reads last (a value may be read twice).
      for (const ir::Atom& a : e.inputs)
        if (!a.is_literal() && last_use[static_cast<std::size_t>(a.var)] == i)
          env[static_cast<std::size_t>(a.var)] = Array();
      const OutputSink region_sink = [&](std::size_t k, Array value) {
        const auto v = static_cast<std::size_t>(e.outputs[k]);
        if (last_use[v] < 0) return;
        env[v] = std::move(value);
        for (const std::size_t out : ready[static_cast<std::size_t>(i) + 1])
          if (!graph.outvars[out].is_literal() &&
              static_cast<std::size_t>(graph.outvars[out].var) == v)
            deliver_one(out);
      };
      run_graph(ir::call_graph(e), std::move(args_in), &region_sink, nullptr);
    } else {
      inputs.clear();
      for (std::size_t j = 0; j < e.inputs.size(); ++j) {
        const ir::Atom& a = e.inputs[j];
        if (a.is_literal()) {
          inputs.push_back(a.literal);
          continue;
        }
        // The last reader of a value takes it (at its last operand slot), so that a primitive
        // allowed to write into an operand's buffer (fused_elementwise's donate) sees it
        // unshared, as XLA's buffer assignment reuses a dead operand's buffer.
        const auto v = static_cast<std::size_t>(a.var);
        const bool last =
            last_use[v] == i &&
            std::none_of(e.inputs.begin() + static_cast<std::ptrdiff_t>(j) + 1, e.inputs.end(),
                         [&](const ir::Atom& b) { return !b.is_literal() && b.var == a.var; });
        inputs.push_back(last ? std::move(env[v]) : env[v]);
      }
      std::vector<Array> outs;
      {
        const std::optional<ArenaPlacement> placing = arena ? arena->place(i, e) : std::nullopt;
        outs = ir::bind(*e.prim, inputs, e.params);
      }
      inputs.clear();  // drop our references before releasing the environment's
      if (arena) arena->settle(e.outputs, outs);
      for (std::size_t k = 0; k < outs.size(); ++k)
        if (last_use[static_cast<std::size_t>(e.outputs[k])] >= 0)
          env[static_cast<std::size_t>(e.outputs[k])] = std::move(outs[k]);
    }
    for (const ir::Atom& a : e.inputs)
      if (!a.is_literal() && last_use[static_cast<std::size_t>(a.var)] == i)
        env[static_cast<std::size_t>(a.var)] = Array();
    if (arena) arena->release(i);
    deliver(static_cast<std::size_t>(i) + 1);
  }
  std::vector<Array> results;
  if (sink != nullptr) return results;
  for (const ir::Atom& a : graph.outvars)
    results.push_back(a.is_literal() ? a.literal : env[static_cast<std::size_t>(a.var)]);
  return results;
}

}  // namespace

std::vector<Array> eval_graph(const ir::Graph& graph, std::vector<Array>&& args) {
  return run_graph(graph, std::move(args), nullptr, nullptr);
}

void eval_graph(const ir::Graph& graph, std::vector<Array>&& args, const OutputSink& on_output) {
  run_graph(graph, std::move(args), &on_output, nullptr);
}

std::vector<Array> eval_graph(const ir::Graph& graph, std::vector<Array>&& args,
                              const BufferAssignment& buffers) {
  return run_graph(graph, std::move(args), nullptr, &buffers);
}

std::vector<Array> eval_graph(const ir::Graph& graph, std::vector<Array>&& args,
                              const BufferAssignment& buffers,
                              std::span<const OutputDestination> destinations) {
  return run_graph(graph, std::move(args), nullptr, &buffers, destinations);
}

}  // namespace flaxpp
