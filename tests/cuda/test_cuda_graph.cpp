// The train step's CUDA graph: on a GPU, a shape's forward and backward pass are recorded once
// and replayed. A replayed step must give the eager step's bits (loss, parameters, optimiser
// state) under any policy and batch; parameters that moved fall back to an eager step; the
// device's peak counts the replayed work's temporaries. Without a GPU the backend records
// nothing and says so.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/ir/graph.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/nn/dense.hpp"
#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/nn/layer_norm.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/losses.hpp"
#include "flaxpp/optim/schedule.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/random/key.hpp"
#include "src/tools/mlp_apply.hpp"
#include "flaxpp/train/train_state.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/trace.hpp"
#include "harness/finite_diff.hpp"
#include "harness/tree_bits.hpp"

using namespace flaxpp;
namespace cp = flaxpp::checkpoint_policies;

namespace {

const bool kNoGpu = !is_available(DeviceKind::cuda);

struct Batch {
  Array x, y;
};
std::vector<Batch> batches() {
  std::vector<Batch> out;
  for (unsigned b = 0; b < 3; ++b) {
    std::vector<std::int32_t> labels(48);
    for (std::size_t i = 0; i < labels.size(); ++i)
      labels[i] = static_cast<std::int32_t>((i * 7 + b) % 10);
    out.push_back({astype(testing::random_f64(Shape{48, 20}, 90 + b, -2.0, 2.0), DType::f32),
                   Array::from_vector(labels, Shape{48})});
  }
  return out;
}

struct Run {
  std::vector<float> losses;
  train::TrainState state;
  std::int64_t replays = 0;
};

// `steps` steps from the same initial parameters, on `device`, with or without graphs; with
// `keep_at`, the caller keeps a copy of the parameters before that step.
Run train_on(Device device, const PolicyPtr& policy, bool graphs, int steps, int keep_at = -1) {
  const nn::MLP mlp{.features = {64, 32, 10}};
  const std::vector<Batch> data = batches();
  train::ClassifierStep step(train::mlp_apply(mlp, policy),
                             optim::adam(optim::cosine_decay_schedule(0.01, 20)));
  step.set_graphs(graphs);
  Tree params = nn::Model(mlp).init(random::key(3), data[0].x)["params"];
  params = tree_map(params, [&](const Array& p) { return p.to(device); });
  Run run{{}, step.init(params), 0};
  params = Tree();
  Tree kept;
  for (int i = 0; i < steps; ++i) {
    if (i == keep_at) kept = run.state.params;
    const Batch& b = data[static_cast<std::size_t>(i) % data.size()];
    run.losses.push_back(step(run.state, b.x, b.y));
  }
  run.replays = step.replays();
  return run;
}

}  // namespace

TEST_CASE("CUDA graphs: a replayed train step gives the eager step's bits, under any policy" *
          doctest::skip(kNoGpu)) {
  const std::vector<PolicyPtr> policies = {cp::none(), cp::dots_with_no_batch_dims_saveable(),
                                           cp::nothing_saveable()};
  for (const auto& policy : policies) {
    CAPTURE(policy->str());
    const Run eager = train_on(Device::cuda(0), policy, false, 7);
    const Run replayed = train_on(Device::cuda(0), policy, true, 7);
    CHECK(eager.replays == 0);
    CHECK(replayed.replays == 6);  // the first step runs eagerly, every later one replays
    CHECK(replayed.losses == eager.losses);
    testing::check_same_bits(replayed.state.params, eager.state.params);
    testing::check_same_bits(replayed.state.opt_state["0"]["mu"], eager.state.opt_state["0"]["mu"]);
    testing::check_same_bits(replayed.state.opt_state["0"]["nu"], eager.state.opt_state["0"]["nu"]);
  }
}

TEST_CASE("CUDA graphs: parameters that moved run the step eagerly, with the same bits" *
          doctest::skip(kNoGpu)) {
  // A copy kept before step 3 stops donation there: step 3's new parameters get new buffers,
  // so step 4 cannot replay; from step 5 on the parameters stay put again.
  const Run eager = train_on(Device::cuda(0), cp::none(), false, 7);
  const Run replayed = train_on(Device::cuda(0), cp::none(), true, 7, 3);
  CHECK(replayed.replays == 5);
  CHECK(replayed.losses == eager.losses);
  testing::check_same_bits(replayed.state.params, eager.state.params);
}

TEST_CASE("CUDA graphs: an offload policy is not recorded, and its steps run eagerly" *
          doctest::skip(kNoGpu)) {
  // Pinned host memory and side-stream copies cannot be part of a recording: it fails, says
  // so on stderr, and every step runs eagerly with the eager bits.
  const Run eager = train_on(Device::cuda(0), cp::offload_dot_with_no_batch_dims(), false, 4);
  const Run asked = train_on(Device::cuda(0), cp::offload_dot_with_no_batch_dims(), true, 4);
  CHECK(asked.replays == 0);
  CHECK(asked.losses == eager.losses);
  testing::check_same_bits(asked.state.params, eager.state.params);
}

TEST_CASE("CUDA graphs: a replayed step's peak counts the recorded temporaries" *
          doctest::skip(kNoGpu)) {
  // A large batch through a small MLP: the activations (2048 x 64 floats per layer, 512 KiB)
  // dwarf the parameters, so a replay that counted none of its temporaries would show a peak
  // about 1 MiB below the eager step's.
  const Array x = astype(testing::random_f64(Shape{2048, 20}, 7, -2.0, 2.0), DType::f32);
  std::vector<std::int32_t> labels(2048);
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<std::int32_t>(i % 10);
  const Array y = Array::from_vector(labels, Shape{2048});
  struct Peak {
    std::int64_t peak, live_before;
  };
  auto step_peak = [&](bool graphs) {
    const nn::MLP mlp{.features = {64, 64, 10}};
    train::ClassifierStep step(train::mlp_apply(mlp, cp::none()), optim::sgd(0.01));
    step.set_graphs(graphs);
    Tree params = nn::Model(mlp).init(random::key(3), x)["params"];
    params = tree_map(params, [](const Array& p) { return p.to(Device::cuda(0)); });
    train::TrainState state = step.init(params);
    params = Tree();
    for (int i = 0; i < 3; ++i)
      step(state, x, y);
    Backend& gpu = backend(Device::cuda(0));
    gpu.synchronize();
    gpu.reset_peak_memory();
    const std::int64_t live = gpu.memory_stats().live_bytes;
    step(state, x, y);
    CHECK(step.replays() == (graphs ? 3 : 0));
    return Peak{gpu.memory_stats().peak_bytes, live};
  };
  const Peak eager = step_peak(false), replayed = step_peak(true);
  // The replay's peak is the recorded step's: what the eager step reaches, give or take the
  // batch buffers (2048 x 21 x 4 bytes), which a replay keeps allocated between steps.
  CHECK(replayed.peak - replayed.live_before > 1024 * 1024);
  CHECK(std::abs(replayed.peak - eager.peak) <= 2 * 2048 * 21 * 4);
}

namespace {

// Every concrete constant and literal of `g` and its sub-graphs, with a check of its device.
void check_constants_on(const ir::Graph& g, Device device, int& seen) {
  for (const Array& c : g.consts) {
    CHECK(c.device() == device);
    ++seen;
  }
  for (const ir::Eqn& e : g.eqns) {
    for (const ir::Atom& a : e.inputs)
      if (a.is_literal()) {
        CHECK(a.literal.device() == device);
        ++seen;
      }
    ir::for_each_subgraph(e, [&](const std::string&, const ir::Graph& sub) {
      check_constants_on(sub, device, seen);
    });
  }
}

}  // namespace

TEST_CASE("CUDA graphs: a graph's constants and literals move to the GPU, in sub-graphs too" *
          doctest::skip(kNoGpu)) {
  // Made with the CPU as the default device: the literals (2.0, the mean's divisor) and the
  // captured array are host arrays, which a recording cannot copy from.
  const Array offset = Array::from_vector(std::vector<float>{1.0f, 2.0f, 3.0f}, Shape{3});
  const ArrayFn body = [offset](std::span<const Array> in) {
    return std::vector<Array>{mean(relu(in[0] * 2.0 + offset))};
  };
  const AVal aval{Shape{3}, DType::f32};
  const ir::Graph g = make_graph(checkpoint(body, cp::nothing_saveable()), std::span(&aval, 1));
  const ir::Graph moved = ir::with_constants_on(g, Device::cuda(0));
  int seen = 0;
  check_constants_on(moved, Device::cuda(0), seen);
  CHECK(seen >= 3);
  const Array x = Array::from_vector(std::vector<float>{-1.0f, 0.5f, 2.0f}, Shape{3});
  CHECK(eval_graph(moved, std::span(&x, 1))[0].to_vector<float>()[0] ==
        doctest::Approx(eval_graph(g, std::span(&x, 1))[0].to_vector<float>()[0]));
}

TEST_CASE(
    "CUDA graphs: on the CPU a train step asked for graphs runs eagerly, with the same bits") {
  const Run eager = train_on(Device::cpu(), cp::nothing_saveable(), false, 4);
  const Run asked = train_on(Device::cpu(), cp::nothing_saveable(), true, 4);
  CHECK(asked.replays == 0);
  CHECK(asked.losses == eager.losses);
  testing::check_same_bits(asked.state.params, eager.state.params);
  testing::check_same_bits(asked.state.opt_state["0"]["mu"], eager.state.opt_state["0"]["mu"]);
}

namespace {

// A bf16 model with LayerNorm (cuDNN's where it takes it, flaxpp's kernels otherwise):
// Dense -> LayerNorm -> relu -> Dense, computing in bf16 with float32 parameters.
struct NormedMlp {
  static constexpr const char* name = "NormedMlp";
  Array operator()(nn::Scope& s, Array x) const {
    x = s(nn::Dense{.features = 256, .dtype = DType::bf16}, x);
    x = relu(s(nn::LayerNorm{}, x));
    return s(nn::Dense{.features = 10, .dtype = DType::bf16}, x);
  }
};

}  // namespace

TEST_CASE("CUDA graphs: a bf16 model with LayerNorm replays with the eager step's bits" *
          doctest::skip(kNoGpu)) {
  const std::vector<Batch> data = batches();
  auto run = [&](bool graphs) {
    const nn::Model<NormedMlp> model{NormedMlp{}};
    train::ClassifierStep step(
        [model](const Tree& params, const Array& x) {
          return astype(model.apply(nn::Variables{{"params", params}}, x), DType::f32);
        },
        optim::adam(0.01));
    step.set_graphs(graphs);
    Tree params = model.init(random::key(5), data[0].x.to(Device::cuda(0)))["params"];  // bf16 on the GPU
    params = tree_map(params, [](const Array& p) { return p.to(Device::cuda(0)); });
    Run r{{}, step.init(params), 0};
    params = Tree();
    for (int i = 0; i < 6; ++i) {
      const Batch& b = data[static_cast<std::size_t>(i) % data.size()];
      r.losses.push_back(step(r.state, b.x, b.y));
    }
    r.replays = step.replays();
    return r;
  };
  const Run eager = run(false), replayed = run(true);
  CHECK(replayed.replays == 5);
  CHECK(replayed.losses == eager.losses);
  CHECK(eager.losses.back() < eager.losses.front());
  testing::check_same_bits(replayed.state.params, eager.state.params);
}

namespace {
struct JitRun {
  std::vector<float> losses;
  Tree params, state;
  std::int64_t replays = 0;
};
}  // namespace

TEST_CASE("CUDA graphs: a jitted step of its own is recorded on its second call and replayed, "
          "its host count on the GPU, its memory as planned" * doctest::skip(kNoGpu)) {
  // A regression MLP with l2_loss and Adam (whose count init makes in host memory), the whole
  // step one jitted function: the recording holds forward, backward and update.
  const nn::MLP mlp{.features = {32, 1}};
  const optim::GradientTransformation tx = optim::adam(optim::cosine_decay_schedule(0.01, 10));
  const Array x = astype(testing::random_f64(Shape{64, 8}, 11, -1.0, 1.0), DType::f32);
  const Array y = astype(testing::random_f64(Shape{64, 1}, 12, -1.0, 1.0), DType::f32);
  const auto step_fn = [&](std::span<const Tree> a) {
    auto [loss, grads] = value_and_grad([&](const Tree& p) {
      return mean(optim::l2_loss(nn::Model(mlp).apply(nn::Variables{{"params", p}}, a[2].array()),
                                 a[3].array()));
    })(a[0]);
    auto [params, state] = optim::apply_gradients(tx, std::move(grads), a[1], a[0]);
    return std::vector<Tree>{params, state, Tree(loss)};
  };
  auto run = [&](bool graphs) {
    Jitted step = jit(step_fn, {.donate_argnums = {0, 1}});
    step.set_cuda_graphs(graphs);
    Tree params = nn::Model(mlp).init(random::key(4), x)["params"];
    params = tree_map(params, [](const Array& p) { return p.to(Device::cuda(0)); });
    Tree state = tx.init(params);  // its count lives on the host
    const Array xg = x.to(Device::cuda(0)), yg = y.to(Device::cuda(0));
    std::vector<float> losses;
    for (int i = 0; i < 6; ++i) {
      std::vector<Tree> out = step({std::move(params), std::move(state), xg, yg});
      params = std::move(out[0]);
      state = std::move(out[1]);
      losses.push_back(out[2].array().to_vector<float>()[0]);
    }
    CHECK(step.num_traces() == 1);  // the host count and the GPU's next one: one signature
    return JitRun{losses, params, state, step.replays()};
  };
  const JitRun eager = run(false), replayed = run(true);
  CHECK(eager.replays == 0);
  CHECK(replayed.replays == 5);
  CHECK(replayed.losses == eager.losses);
  testing::check_same_bits(replayed.params, eager.params);
  testing::check_same_bits(replayed.state, eager.state);
}

TEST_CASE("CUDA jit: a bf16 model's 16-bit chains fuse, with the unfused step's bits" *
          doctest::skip(kNoGpu)) {
  // Flax's dtype=bfloat16 (parameters in float32): the bias adds, relus and their masks run in
  // bf16, which the GPU's fused kernel rounds after each instruction as each primitive would.
  const nn::MLP mlp{.features = {64, 32, 10}, .dtype = DType::bf16};
  const Batch b = batches()[0];
  const auto loss_and_grads = [&](std::span<const Tree> a) {
    auto [loss, grads] = value_and_grad([&](const Tree& p) {
      const Array logits = nn::Model(mlp).apply(nn::Variables{{"params", p}}, a[1].array());
      return mean(optim::softmax_cross_entropy_with_integer_labels(astype(logits, DType::f32),
                                                                   a[2].array()));
    })(a[0]);
    return std::vector<Tree>{Tree(loss), grads};
  };
  Tree params = nn::Model(mlp).init(random::key(5), b.x.to(Device::cuda(0)))["params"];  // bf16 on the GPU
  params = tree_map(params, [](const Array& p) { return p.to(Device::cuda(0)); });
  const std::vector<Tree> args{params, Tree(b.x.to(Device::cuda(0))),
                               Tree(b.y.to(Device::cuda(0)))};
  const Jitted fused = jit(loss_and_grads);
  const Jitted plain = jit(loss_and_grads, {.donate_argnums = {},
                                            .fuse_elementwise = false,
                                            .fuse_dot_bias = false,
                                            .overlap_collectives = true});
  const CompiledStep compiled = fused.lower(args);
  int bf16_programs = 0;
  for (const ir::Eqn& e : compiled.graph().eqns)
    if (e.prim == &lax::fused_elementwise_p && !e.outputs.empty())
      bf16_programs += compiled.graph().aval(e.outputs[0]).dtype == DType::bf16;
  CHECK(bf16_programs >= 2);  // the hidden layers' relus forward and backward
  const std::vector<Tree> got = fused(args), want = plain(args);
  CHECK(got[0].array().to_vector<float>() == want[0].array().to_vector<float>());
  testing::check_same_bits(got[1], want[1]);
}

TEST_CASE("CUDA graphs: a language model (Embed: take, scatter_add) is recorded and replayed with "
          "the eager step's bits, and an id out of range fails its step" *
          doctest::skip(kNoGpu)) {
  // take and scatter_add check and group their indices on the GPU: nothing reads them back, so
  // the step records (desk review 2 #7). A bad id is clamped by the kernel and reported at the
  // step's next synchronisation (reading its loss), naming the index.
  const nn::Model lm(nn::LanguageModel{
      .vocab = 16, .features = 32, .num_layers = 2, .num_heads = 2, .mlp_dim = 64, .max_len = 8});
  auto tokens = [](std::int32_t first) {
    std::vector<std::int32_t> ids(4 * 8);
    for (std::size_t k = 0; k < ids.size(); ++k)
      ids[k] = static_cast<std::int32_t>((first + 5 * static_cast<std::int32_t>(k)) % 16);
    return Array::from_vector(ids, Shape{4, 8}).to(Device::cuda(0));
  };
  const Array x = tokens(1), y = tokens(2);
  auto run = [&](bool graphs) {
    train::ClassifierStep step(
        [lm](const Tree& p, const Array& in) {
          return lm.apply(nn::Variables{{"params", p}}, in);
        },
        optim::sgd(0.1));
    step.set_graphs(graphs);
    Tree params = lm.init(random::key(0), x)["params"];
    params = tree_map(params, [](const Array& p) { return p.to(Device::cuda(0)); });
    Run r{{}, step.init(params), 0};
    for (int i = 0; i < 5; ++i) r.losses.push_back(step(r.state, x, y));
    r.replays = step.replays();
    if (graphs) {
      std::vector<std::int32_t> bad(4 * 8, 3);
      bad[13] = 16;
      const Array bad_x = Array::from_vector(bad, Shape{4, 8}).to(Device::cuda(0));
      CHECK_THROWS_WITH_AS((void)step(r.state, bad_x, y), doctest::Contains("index 16 (element 13"),
                           ValueError);
    }
    return r;
  };
  const Run eager = run(false), replayed = run(true);
  CHECK(replayed.replays == 4);
  CHECK(replayed.losses == eager.losses);
  CHECK(eager.losses.back() < eager.losses.front());
}
