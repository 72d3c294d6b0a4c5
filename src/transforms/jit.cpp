// jit: signatures, tracing into a Graph once per signature, the passes, and the replay with
// donation.
#include "flaxpp/transforms/jit.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/precision.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/transforms/trace.hpp"
#include "transforms/remat_budget.hpp"
#include "transforms/step_recording.hpp"
#include "transforms/verify_passes.hpp"

namespace flaxpp {
namespace {

bool graphs_enabled_by_environment() {
  const char* v = std::getenv("FLAXPP_CUDA_GRAPHS");
  if (v == nullptr) return true;
  const std::string_view s(v);
  return s != "0" && s != "false" && s != "off";
}

// The device the step runs on: the first GPU among the arguments' leaves, else the CPU (host
// leaves join a GPU computation, as in eager mode).
Device device_of(std::span<const Tree> args) {
  for (const Tree& t : args)
    for (const Array& a : t.leaves())
      if (a.device().kind != DeviceKind::cpu) return a.device();
  return Device::cpu();
}

// Where a leaf takes part in a step on `step`: host leaves join a GPU step (jit puts them on
// the GPU first, as jax.jit does its arguments), so their signature is the GPU's.
Device placed(const Array& a, Device step) {
  return a.device().kind == DeviceKind::cpu ? step : a.device();
}

// A tree's structure and leaves' avals and devices, as text: "{b: f32[4]@cpu, w: {...}}".
void describe(const Tree& t, Device step, std::string& out) {
  if (t.is_leaf()) {
    const Array& a = t.array();
    out += detail::str(dtype_short_name(a.dtype()), a.shape(), "@", placed(a, step));
    return;
  }
  out += "{";
  bool first = true;
  for (const auto& [key, sub] : t.items()) {
    out += detail::str(first ? "" : ", ", key, ": ");
    describe(sub, step, out);
    first = false;
  }
  out += "}";
}

std::string signature_of(std::span<const Tree> args) {
  // The matmul precision is fixed in the traced graph: it is part of the signature, as jax.jit
  // keys its cache on jax_default_matmul_precision.
  const Device step = device_of(args);
  std::string out = detail::str("[", matmul_precision_name(default_matmul_precision()), "] (");
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i > 0) out += ", ";
    describe(args[i], step, out);
  }
  return out + ")";
}

// A traced argument leaf: what a later call's leaf must match.
struct LeafSig {
  AVal aval;
  Device device;
};

// Where `got` first differs from the traced argument (`structure`, with null leaves, and the
// leaves' signatures from `next` on), for an error message; empty when it does not.
std::string first_difference(const Tree& structure, const std::vector<LeafSig>& leaves,
                             std::size_t& next, const Tree& got, Device step,
                             const std::string& path) {
  const std::string at = path.empty() ? std::string("its root") : path;
  if (structure.is_leaf() != got.is_leaf())
    return detail::str("at ", at, ": expected ", structure.is_leaf() ? "a leaf" : "a dict",
                       ", got ", got.is_leaf() ? "a leaf" : "a dict");
  if (structure.is_leaf()) {
    const LeafSig& w = leaves[next++];
    const Array& g = got.array();
    if (w.aval != g.aval() || w.device != placed(g, step))
      return detail::str("at ", at, ": expected ", w.aval, " on ", w.device, ", got ", g.aval(),
                         " on ", g.device());
    return "";
  }
  if (structure.keys() != got.keys()) {
    auto list = [](const std::vector<std::string>& keys) {
      std::string out = "[";
      for (std::size_t i = 0; i < keys.size(); ++i)
        out += detail::str(i ? ", " : "", keys[i]);
      return out + "]";
    };
    return detail::str("at ", at, ": expected keys ", list(structure.keys()), ", got ",
                       list(got.keys()));
  }
  for (const auto& [key, sub] : structure.items()) {
    const std::string d =
        first_difference(sub, leaves, next, got[key], step, path.empty() ? key : path + "/" + key);
    if (!d.empty()) return d;
  }
  return "";
}

// The structure of `t` with null leaves (a template for Tree::with_leaves).
Tree structure_of(const Tree& t) {
  const std::vector<Array> leaves = t.leaves();
  return t.with_leaves(std::vector<Array>(leaves.size()));
}

}  // namespace

struct CompiledStep::Impl {
  std::string signature;
  std::vector<Tree> examples;  // the traced arguments' structures and avals (null leaves)
  std::vector<std::size_t> leaf_counts;
  std::vector<bool> donated;  // per argument
  Device device;              // where it runs; host leaves are put there first
  ir::Graph graph;
  MemoryAnalysis memory;
  std::optional<RematPlan> remat;               // what a memory budget chose
  std::vector<std::vector<LeafSig>> leaf_sigs;  // per argument, for error messages
  std::vector<Tree> outputs;                    // the results' structures (null leaves)
  std::vector<std::size_t> output_counts;
  // On a GPU: the step's CUDA-graph recording, used while `graphs` is on.
  std::unique_ptr<transforms::StepRecording> recording;
  std::shared_ptr<const std::atomic<bool>> graphs;
};

const ir::Graph& CompiledStep::graph() const {
  return impl_->graph;
}

const MemoryAnalysis& CompiledStep::memory_analysis() const {
  return impl_->memory;
}

const RematPlan* CompiledStep::remat_plan() const {
  return impl_->remat ? &*impl_->remat : nullptr;
}

const std::string& CompiledStep::signature() const {
  return impl_->signature;
}

std::vector<Tree> CompiledStep::operator()(std::vector<Tree> args) const {
  const Impl& s = *impl_;
  if (args.size() != s.leaf_counts.size())
    throw ValueError(detail::str("a jitted function traced for ", s.leaf_counts.size(),
                                 " arguments was called with ", args.size()));
  if (signature_of(args) != s.signature) {
    for (std::size_t i = 0; i < args.size(); ++i) {
      std::size_t next = 0;
      if (const std::string d =
              first_difference(s.examples[i], s.leaf_sigs[i], next, args[i], s.device, "");
          !d.empty())
        throw ValueError(detail::str(
            "a compiled step was called with argument ", i, " unlike the one it was traced for, ",
            d, ". Call the jitted function itself, which traces each new signature"));
    }
  }
  return run(std::move(args));
}

std::vector<Tree> CompiledStep::run(std::vector<Tree> args) const {
  const Impl& s = *impl_;
  // What the step makes without operands (iota) is made where it computes, as under jax.jit.
  const DefaultDeviceScope on_step_device(s.device);
  // Host leaves of a GPU step go to the GPU first, as jax.jit puts its arguments (an optax
  // count made by init on the host): the step then computes on one device only.
  if (s.device.kind != DeviceKind::cpu)
    for (Tree& t : args) {
      std::vector<Array> leaves = t.leaves();
      if (std::none_of(leaves.begin(), leaves.end(),
                       [](const Array& a) { return a.device().kind == DeviceKind::cpu; }))
        continue;
      for (Array& a : leaves)
        if (a.device().kind == DeviceKind::cpu) a = a.to(s.device);
      t = t.with_leaves(leaves);
    }
  // The graph's inputs: every argument's leaves in order. A donated argument's buffers are
  // taken from the caller (whose arrays become unusable) and handed over, so the graph holds
  // the only reference and frees or reuses each at its last use.
  // A donated buffer that reaches the call more than once (the same array donated and not, two
  // leaves of a donated tree sharing one buffer) cannot be the step's alone: it is copied, and
  // the caller's array stays valid, before anything is taken. Counted only for a step that
  // donates: the others pay nothing per call.
  std::map<const Buffer*, int> uses;
  bool shared_donation = false;
  if (std::find(s.donated.begin(), s.donated.end(), true) != s.donated.end()) {
    for (const Tree& t : args)
      for (const Array& a : t.leaves())
        ++uses[&a.buffer()];
    for (std::size_t i = 0; i < args.size(); ++i)
      if (s.donated[i])
        for (const Array& a : args[i].leaves())
          shared_donation = shared_donation || uses[&a.buffer()] > 1;
  }
  std::vector<Array> leaves;
  if (s.recording != nullptr && s.graphs->load() && !shared_donation) {
    for (const Tree& t : args)
      for (Array& a : t.leaves())
        leaves.push_back(std::move(a));
    std::optional<std::vector<Array>> recorded = s.recording->run(leaves);
    leaves.clear();
    if (recorded) {
      args.clear();
      return assemble(std::move(*recorded));
    }
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    for (Array& a : args[i].leaves()) {
      const Buffer& b = a.buffer();
      if (!s.donated[i])
        leaves.push_back(std::move(a));
      else if (uses[&b] > 1)
        leaves.push_back(a.copy());
      else
        leaves.emplace_back(b.backend().take(b), a.shape(), a.dtype());
    }
  }
  args.clear();
  return assemble(eval_graph(s.graph, std::move(leaves), s.memory.buffers));
}

std::vector<Tree> CompiledStep::assemble(std::vector<Array> results) const {
  const Impl& s = *impl_;
  std::vector<Tree> out;
  std::size_t next = 0;
  for (std::size_t k = 0; k < s.outputs.size(); ++k) {
    out.push_back(s.outputs[k].with_leaves(
        std::span<const Array>(results).subspan(next, s.output_counts[k])));
    next += s.output_counts[k];
  }
  return out;
}

std::int64_t CompiledStep::replays() const {
  return impl_->recording != nullptr ? impl_->recording->replays() : 0;
}

namespace {

// A donated argument that the function also captures becomes a constant of the graph, which
// every later call reads; donating it would hand that buffer to the first call to overwrite.
// Refused at trace time, naming the argument.
void refuse_donated_constants(const ir::Graph& g, std::span<const Tree> args,
                              const std::vector<bool>& donated) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!donated[i]) continue;
    for (const auto& [path, leaf] : args[i].flatten())
      for (const Array& c : g.consts)
        if (!c.is_traced() && &c.buffer() == &leaf.buffer())
          throw ValueError(detail::str(
              "jit: argument ", i, path.empty() ? "" : " leaf " + path, " (", leaf.aval(),
              ") is donated (donate_argnums) but the function also captures it as a constant, "
              "which every later call reads; the donated buffer is the step's to overwrite. Pass "
              "it only as the argument, or do not donate argument ",
              i));
  }
}

}  // namespace

struct Jitted::State {
  TreeFn f;
  JitOptions options;
  std::shared_ptr<std::atomic<bool>> graphs =
      std::make_shared<std::atomic<bool>>(graphs_enabled_by_environment());
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const CompiledStep::Impl>> steps;

  // Traces `flat` on `avals` and runs the passes; the graph and its memory plan.
  transforms::LoweredStep lower_step(const ArrayFn& flat, const std::vector<AVal>& avals,
                                     std::span<const Tree> args, const std::vector<bool>& donated,
                                     const std::vector<bool>& donated_leaves,
                                     const Device& device) const {
    ir::Graph g = make_graph(flat, avals);
    refuse_donated_constants(g, args, donated);
    const bool verify = transforms::verify_passes();
    const auto pass_on = [&](const ir::Graph& graph, auto&& run) {
      run();
      if (verify) graph.verify();
    };
    const auto pass = [&](auto&& run) { pass_on(g, run); };
    if (verify) g.verify();
    // The step's graph and every loop body in it (a scan's, recursively) get the same passes.
    const std::function<void(ir::Graph&)> simplify_and_fuse = [&](ir::Graph& graph) {
      const auto checked = [&](auto&& run) { pass_on(graph, run); };
      checked([&] { ir::cse(graph); });
      // Calls join the step's equations once cse can no longer merge a checkpoint region's
      // recomputation (a remat'd model's backward pass) away, so that their gradients are
      // scheduled with the updates that read them; custom_vjp calls (relu) are differentiated
      // already.
      checked([&] { ir::inline_calls(graph); });
      checked([&] { ir::dce(graph); });
      if (options.fuse_dot_bias) checked([&] { ir::fuse_dot_bias(graph); });
      if (options.fuse_elementwise) {
        // A GPU's fused kernel rounds each instruction to bf16/f16 as its primitive would; the
        // CPU's programs reduce rows.
        const bool cpu = device.kind == DeviceKind::cpu;
        checked([&] { ir::fuse_elementwise(graph, {.sixteen_bit = !cpu, .row_reductions = cpu}); });
        checked([&] { ir::dce(graph); });  // scalars' broadcasts the fused programs no longer read
      }
      ir::rewrite_subgraphs(graph, simplify_and_fuse);
    };
    simplify_and_fuse(g);
    // On the CPU each leaf's update runs as soon as its gradient is final, so that the
    // gradients never all exist at once; a GPU keeps one fused launch per dtype.
    if (device.kind == DeviceKind::cpu) pass([&] { ir::split_fused_groups(g); });
    pass([&] { ir::schedule_early_frees(g, donated_leaves); });
    if (options.overlap_collectives) pass([&] { ir::overlap_collectives(g); });
    MemoryAnalysis memory = plan_memory(g, donated_leaves);
    count_constants(memory, g);
    return {std::move(g), std::move(memory)};
  }

  std::shared_ptr<const CompiledStep::Impl> compile(std::span<const Tree> args,
                                                    std::string signature) {
    auto s = std::make_shared<CompiledStep::Impl>();
    s->signature = std::move(signature);
    const Device device = device_of(args);
    std::vector<AVal> avals;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::vector<Array> leaves = args[i].leaves();
      s->leaf_counts.push_back(leaves.size());
      std::vector<LeafSig> sigs;
      for (const Array& a : leaves) {
        avals.push_back(a.aval());
        sigs.push_back({a.aval(), placed(a, device)});
      }
      s->leaf_sigs.push_back(std::move(sigs));
      s->examples.push_back(structure_of(args[i]));
      s->donated.push_back(std::find(options.donate_argnums.begin(), options.donate_argnums.end(),
                                     static_cast<int>(i)) != options.donate_argnums.end());
    }
    for (const int i : options.donate_argnums)
      if (i < 0 || static_cast<std::size_t>(i) >= args.size())
        throw ValueError(detail::str("jit: donate_argnums names argument ", i, " of a call with ",
                                     args.size(), " arguments"));
    std::vector<bool> donated_leaves;
    for (std::size_t i = 0; i < args.size(); ++i)
      donated_leaves.insert(donated_leaves.end(), s->leaf_counts[i], s->donated[i]);
    const ArrayFn flat = [&](std::span<const Array> in) {
      std::vector<Tree> trees;
      std::size_t next = 0;
      for (std::size_t i = 0; i < s->examples.size(); ++i) {
        trees.push_back(s->examples[i].with_leaves(in.subspan(next, s->leaf_counts[i])));
        next += s->leaf_counts[i];
      }
      const std::vector<Tree> results = f(trees);
      s->outputs.clear();
      s->output_counts.clear();
      std::vector<Array> out;
      for (const Tree& r : results) {
        const std::vector<Array> leaves = r.leaves();
        s->outputs.push_back(structure_of(r));
        s->output_counts.push_back(leaves.size());
        out.insert(out.end(), leaves.begin(), leaves.end());
      }
      return out;
    };
    const transforms::LowerStep lower = [&] {
      return lower_step(flat, avals, args, s->donated, donated_leaves, device);
    };
    transforms::LoweredStep lowered;
    if (options.memory_budget > 0) {
      s->remat.emplace();
      lowered = transforms::plan_remat(options.memory_budget, lower, ir::CostModel::of(device.kind),
                                       *s->remat);
    } else {
      lowered = lower();
    }
    ir::Graph& g = lowered.graph;
    s->device = device;
    s->memory = std::move(lowered.memory);
    // A step on a GPU copies nothing from the host per call.
    s->graph = device.kind == DeviceKind::cpu ? std::move(g) : ir::with_constants_on(g, device);
    s->graphs = graphs;
    if (device.kind != DeviceKind::cpu) {
      std::size_t num_outputs = 0;
      for (const std::size_t c : s->output_counts)
        num_outputs += c;
      s->recording = std::make_unique<transforms::StepRecording>(
          s->graph, s->memory, std::move(donated_leaves), num_outputs, device);
    }
    return s;
  }

  std::shared_ptr<const CompiledStep::Impl> find_or_compile(std::span<const Tree> args) {
    const std::string key = signature_of(args);
    {
      std::lock_guard lock(mutex);
      if (auto it = steps.find(key); it != steps.end()) return it->second;
    }
    // Traced outside the lock: f may itself call jitted functions.
    std::shared_ptr<const CompiledStep::Impl> step = compile(args, key);
    std::lock_guard lock(mutex);
    return steps.emplace(key, std::move(step)).first->second;
  }
};

Jitted::Jitted(TreeFn f, JitOptions options) : state_(std::make_shared<State>()) {
  if (!f) throw ValueError("jit: the function is empty");
  state_->f = std::move(f);
  state_->options = std::move(options);
}

std::vector<Tree> Jitted::operator()(std::vector<Tree> args) const {
  // find_or_compile matched the signature already.
  return CompiledStep(state_->find_or_compile(args)).run(std::move(args));
}

CompiledStep Jitted::lower(std::span<const Tree> args) const {
  return CompiledStep(state_->find_or_compile(args));
}

std::size_t Jitted::num_traces() const {
  std::lock_guard lock(state_->mutex);
  return state_->steps.size();
}

void Jitted::set_cuda_graphs(bool on) {
  state_->graphs->store(on);
  if (on) return;
  std::lock_guard lock(state_->mutex);
  for (const auto& [key, step] : state_->steps)
    if (step->recording != nullptr) step->recording->forget(true);
}

std::int64_t Jitted::replays() const {
  std::lock_guard lock(state_->mutex);
  std::int64_t n = 0;
  for (const auto& [key, step] : state_->steps)
    n += CompiledStep(step).replays();
  return n;
}

Jitted jit(TreeFn f, JitOptions options) {
  return Jitted(std::move(f), std::move(options));
}

}  // namespace flaxpp
