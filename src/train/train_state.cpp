// TrainState and the compiled classifier step.
#include "flaxpp/train/train_state.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "flaxpp/core/precision.hpp"
#include "flaxpp/nn/remat.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/dist/communicator.hpp"
#include "flaxpp/optim/losses.hpp"

namespace flaxpp::train {
namespace {

// A 0-d result on the host as float (a bf16 model's loss is bf16).
float host_float(const Array& x) {
  return astype(x, DType::f32).item<float>();
}

}  // namespace

Tree TrainState::to_tree() const {
  return Tree{{"params", params},
              {"opt_state", opt_state},
              {"step", Array::scalar(static_cast<std::int32_t>(step))}};
}

TrainState TrainState::from_tree(const Tree& tree) {
  for (const char* key : {"params", "opt_state", "step"})
    if (!tree.contains(key))
      throw ValueError(detail::str(
          "a train-state checkpoint needs \"params\", \"opt_state\" and \"step\"; \"", key,
          tree.is_leaf() ? "\" is missing (its root is an array)" : "\" is missing"));
  const Tree& step = tree["step"];
  const auto bad_step = [&](const std::string& got) {
    return ValueError(detail::str("a train-state checkpoint's \"step\" must be an int32 scalar ",
                                  "(shape []) >= 0, got ", got,
                                  "; the checkpoint is corrupt or is not a train state"));
  };
  if (!step.is_leaf()) throw bad_step(detail::str("a dict with ", step.size(), " keys"));
  const Array& s = step.array();
  if (s.dtype() != DType::i32 || s.rank() != 0) throw bad_step(s.aval().str());
  const std::int32_t value = s.to_vector<std::int32_t>()[0];
  if (value < 0) throw bad_step(std::to_string(value));
  return {tree["params"], tree["opt_state"], value};
}

TrainState ClassifierStep::restore(const Tree& checkpoint) const {
  TrainState state = TrainState::from_tree(checkpoint);
  optim::check_state(tx_, state.params, state.opt_state);
  return state;
}

ApplyFn mlp_apply(const nn::MLP& mlp, const std::optional<PolicyPtr>& policy) {
  auto apply_of = [](const auto& model) -> ApplyFn {
    return [model](const Tree& params, const Array& x) {
      return model.apply(nn::Variables{{"params", params}}, x);
    };
  };
  return policy ? apply_of(remat<nn::MLP>(*policy)(mlp)) : apply_of(nn::Model(mlp));
}

// One input shape's compiled step, and on a GPU its recorded forward and backward pass with
// what the recording reads (the parameters' addresses, the batch buffers) and keeps (the loss
// and the gradients, rewritten by every launch).
struct ClassifierStep::Traced {
  explicit Traced(CompiledVjp v) : vjp(std::move(v)) {}
  // Drops the recording and what it kept (the graph first: a recording never launched made
  // none of them); another may be made later if `may_record_again` and there were few.
  void forget(bool may_record_again);

  CompiledVjp vjp;
  Array seed;              // 1 of the loss's dtype on its device, made by the first eager step
  bool recordable = true;  // false once a recording failed, or after too many
  int recordings = 0;
  std::vector<const void*> param_addresses;
  std::shared_ptr<Buffer> x_buffer, y_buffer;
  Array loss;
  std::vector<Array> grads;
  // Destroyed before the buffers it kept (loss, grads): a recording never launched made none.
  std::unique_ptr<DeviceGraph> graph;
};

namespace {

bool graphs_enabled_by_environment() {
  const char* v = std::getenv("FLAXPP_CUDA_GRAPHS");
  if (v == nullptr) return true;
  const std::string_view s(v);
  return s != "0" && s != "false" && s != "off";
}

// One line on stderr when a shape's step cannot be a CUDA graph.
void say_eager(Device device, const std::string& why) {
  std::fprintf(stderr, "flaxpp: this train step runs eagerly on %s, without a CUDA graph: %s\n",
               device.str().c_str(), why.c_str());
}

// Runs `update`, which takes over state's parameters and optimiser state (donation), and
// counts the step. If it fails, `state` is left without them, as JAX deletes donated arrays.
template <class F>
void update_donated(TrainState& state, F&& update) {
  try {
    update();
  } catch (...) {
    state.params = Tree();
    state.opt_state = Tree();
    throw;
  }
  ++state.step;
}

// Recordings of one shape whose parameters keep moving (copies kept every step) would cost
// more than they save.
constexpr int kMaxRecordings = 3;

const void* address(const Array& a) {
  return a.buffer().data();
}

// The loss and the parameters' gradients (the first n inputs') of one forward and backward
// pass; the inputs are let go after the forward pass.
std::pair<Array, std::vector<Array>> loss_and_grads(const CompiledVjp& vjp,
                                                    std::vector<Array> inputs, const Array& seed,
                                                    std::size_t n) {
  VjpResult r = vjp(inputs);
  inputs.clear();
  std::vector<Array> grads(n);
  r.backward_into(std::span<const Array>(&seed, 1), [&](std::size_t i, Array ct) {
    if (i < n) grads[i] = std::move(ct);
  });
  return {r.outputs[0], std::move(grads)};
}

// The identity for one process; over `comm`, the mean of a per-shard mean (of `rows` rows on
// this process) over every process's rows: sum over processes of value * rows / total rows
// (the same division for every leaf, so each process applies the same update). The total is
// one collective of an int32 per call.
std::function<Array(Array)> shard_mean(dist::Communicator* comm, std::int64_t rows) {
  if (comm == nullptr || comm->size() == 1) return [](Array a) { return a; };
  const Array mine = Array::from_vector(std::vector<std::int32_t>{static_cast<std::int32_t>(rows)},
                                        Shape{}, Device::cpu());
  const std::int64_t total = comm->all_reduce(mine, dist::ReduceOp::sum).item<std::int32_t>();
  if (total == 0)
    throw ValueError("a data-parallel step over batches of no rows on every process");
  const double weight = static_cast<double>(rows) / static_cast<double>(total);
  return [comm, weight](Array a) {
    return comm->all_reduce(astype(a * weight, a.dtype()), dist::ReduceOp::sum);
  };
}

// Writes `a`'s elements into `dst`, a buffer of its size (ordered after the work queued on
// dst's device, which may still read the old ones).
void copy_into(const Array& a, Buffer& dst) {
  Backend& be = dst.backend();
  if (a.device().kind == DeviceKind::cpu)
    be.copy_from_host(a.buffer().data(), dst, a.nbytes());
  else
    be.copy(a.to(dst.device()).buffer(), dst, a.nbytes());
}

}  // namespace

void ClassifierStep::Traced::forget(bool may_record_again) {
  graph.reset();
  loss = Array();
  grads.clear();
  x_buffer.reset();
  y_buffer.reset();
  recordable = may_record_again && recordings < kMaxRecordings;
}

ClassifierStep::ClassifierStep(ApplyFn apply, optim::GradientTransformation tx)
    : apply_(std::move(apply)), tx_(std::move(tx)), graphs_(graphs_enabled_by_environment()) {}

void ClassifierStep::set_graphs(bool on) {
  graphs_ = on;
  if (!on)
    for (auto& [key, t] : traced_)
      t->forget(true);
}

void ClassifierStep::record(Traced& t, std::span<const Array> params, const Array& x,
                            const Array& y) {
  ++t.recordings;
  const Device device = params.front().device();
  std::string why;
  std::unique_ptr<DeviceGraph> graph;
  std::pair<Array, std::vector<Array>> kept;  // the loss and gradients
  try {
    // The batch buffers' contents do not matter yet: recording runs nothing.
    Backend& be = backend(device);
    t.x_buffer = be.allocate(x.nbytes());
    t.y_buffer = be.allocate(y.nbytes());
    std::vector<Array> inputs(params.begin(), params.end());
    inputs.emplace_back(t.x_buffer, x.shape(), x.dtype());
    inputs.emplace_back(t.y_buffer, y.shape(), y.dtype());
    graph = be.capture([&] { kept = loss_and_grads(t.vjp, inputs, t.seed, params.size()); }, why);
  } catch (const std::exception& e) {  // e.g. no memory for the batch buffers
    why = e.what();
    graph = nullptr;
  }
  if (graph == nullptr) {
    t.forget(false);
    say_eager(device, why);
    return;
  }
  t.graph = std::move(graph);
  t.param_addresses.clear();
  for (const Array& p : params)
    t.param_addresses.push_back(address(p));
  std::tie(t.loss, t.grads) = std::move(kept);
}

float ClassifierStep::operator()(TrainState& state, const Array& x, const Array& y) {
  // A shard's mean (the loss, a gradient) to the global batch's: weighted by the shard's rows.
  const std::function<Array(Array)> reducer = shard_mean(comm_, x.shape()[0]);
  std::vector<Array> params = state.params.leaves();
  const std::size_t n = params.size();
  // Data sets live in host memory: the batch goes where the parameters are, once.
  const Device device = n > 0 ? params.front().device() : x.device();
  // The matmul precision is fixed in the traced graph: a change traces again, as jax.jit's
  // cache keys on it.
  std::string key = detail::str(device, ";", matmul_precision_name(default_matmul_precision()), ";");
  for (const Array& a : params)
    key += a.aval().str() + ";";
  key += x.aval().str() + ";" + y.aval().str();
  std::shared_ptr<Traced> traced;
  if (const auto it = traced_.find(key); it != traced_.end()) traced = it->second;
  if (!traced) {
    const Tree structure = state.params;
    const ApplyFn apply = apply_;
    const ArrayFn loss = [structure, apply, n](std::span<const Array> in) {
      const Tree p = structure.with_leaves(in.subspan(0, n));
      return std::vector<Array>{
          mean(optim::softmax_cross_entropy_with_integer_labels(apply(p, in[n]), in[n + 1]))};
    };
    std::vector<AVal> avals;
    for (const Array& a : params)
      avals.push_back(a.aval());
    avals.push_back(x.aval());
    avals.push_back(y.aval());
    std::vector<bool> differentiable(avals.size(), true);
    differentiable[n] = differentiable[n + 1] = false;  // the batch
    // Its constants live where it runs: no host copies per step, nothing a CUDA graph
    // recording cannot hold.
    traced = std::make_shared<Traced>(CompiledVjp(loss, avals, differentiable).on(device));
    traced_.emplace(key, traced);
  }
  Traced& t = *traced;

  // A GPU step of a shape seen before replays its recorded forward and backward pass, if the
  // parameters are still where the recording reads them.
  const bool gpu = device.kind != DeviceKind::cpu;
  if (gpu && graphs_ && n > 0 && !t.graph && t.recordable && t.seed.valid())
    record(t, params, x, y);
  bool replay = graphs_ && t.graph != nullptr;
  if (replay && !std::ranges::equal(params, t.param_addresses, {}, address)) {
    // The parameters moved (a copy kept elsewhere stopped donation): this step runs eagerly,
    // and the next one records again, a few times at most.
    replay = false;
    t.forget(true);
  }

  // The loss and the gradients: from the recording, or computed now.
  Array loss;
  std::vector<Array> grads;
  // On the CPU each leaf is updated as soon as its gradient is final, so the gradients never
  // all exist at once (XLA's schedule of a jitted step). On a GPU one fused pass per dtype
  // updates every leaf (one kernel launch, not one per parameter).
  std::unique_ptr<optim::LeafwiseApply> leafwise;
  if (replay) {
    copy_into(x, *t.x_buffer);
    copy_into(y, *t.y_buffer);
    try {
      t.graph->launch();
    } catch (const OutOfMemoryError& e) {
      // The graph's memory does not fit beside the pool's: this shape runs eagerly from now on.
      say_eager(device, e.what());
      t.forget(false);
      replay = false;
    }
  }
  if (replay) {
    ++replays_;
    loss = t.loss;
    grads = t.grads;
  } else {
    std::vector<Array> inputs = params;
    inputs.push_back(x.to(device));
    inputs.push_back(y.to(device));
    if (!t.seed.valid()) {
      // The loss's cotangent, made once per shape (not a host-to-device copy per step).
      const AVal out = t.vjp.output_avals().front();
      t.seed = Array::full(Shape{}, 1.0, out.dtype, device);
    }
    if (!gpu && leafwise_possible_) {
      leafwise = optim::LeafwiseApply::start(tx_, state.opt_state, state.params);
      leafwise_possible_ = leafwise != nullptr;  // the same optimiser every step
    }
    params.clear();
    if (!leafwise) {
      std::tie(loss, grads) = loss_and_grads(t.vjp, std::move(inputs), t.seed, n);
    } else {
      VjpResult r = t.vjp(inputs);
      inputs.clear();
      loss = r.outputs[0];
      // Gradients, parameters and optimiser state are given up to the update, so the new values
      // take the old ones' buffers where nothing else holds them (donation).
      state.params = Tree();
      state.opt_state = Tree();
      update_donated(state, [&] {
        r.backward_into(std::span<const Array>(&t.seed, 1), [&](std::size_t i, Array ct) {
          if (i < n) leafwise->apply(i, reducer(std::move(ct)));
        });
        std::tie(state.params, state.opt_state) = leafwise->finish();
      });
      return host_float(reducer(loss));
    }
  }
  params.clear();
  for (Array& g : grads)
    g = reducer(std::move(g));
  Tree g = state.params.with_leaves(grads);
  grads.clear();
  update_donated(state, [&] {
    std::tie(state.params, state.opt_state) = optim::apply_gradients(
        tx_, std::move(g), std::move(state.opt_state), std::move(state.params));
  });
  g = Tree();
  // Every launch rewrites the recording's gradients in place: one that an optimiser kept (a
  // custom one may) must become its own, so the recording lets go of them all.
  if (replay && std::ranges::any_of(
                    t.grads, [](const Array& a) { return a.valid() && !a.buffer_unshared(); }))
    t.forget(true);
  return host_float(reducer(loss));
}

std::pair<float, float> ClassifierStep::evaluate(const Tree& params, const Array& x,
                                                 const Array& y) const {
  const Array logits = apply_(params, x);
  const std::function<Array(Array)> reducer = shard_mean(comm_, x.shape()[0]);
  return {host_float(reducer(mean(optim::softmax_cross_entropy_with_integer_labels(logits, y)))),
          host_float(reducer(optim::accuracy(logits, y)))};
}

}  // namespace flaxpp::train
