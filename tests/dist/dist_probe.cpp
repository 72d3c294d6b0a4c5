// A program for `mpirun -np N` (ctest's flaxpp_dist_* jobs): each rank checks the collectives
// against values computed from the ranks, or plays a failure.
//   dist_probe collectives   every dtype through all_reduce (sum, mean, max), broadcast,
//                            all_gather and barrier; prints "rank R: N checks passed"
//   dist_probe ddp           data-parallel training: each rank steps train::ClassifierStep on its
//                            shard (of unequal rows) of a global batch; the losses, parameters
//                            and metrics must be the one-process step's on the whole batch, and
//                            the parameters bit-identical on every rank
//   dist_probe jit_ddp       a data-parallel train step as an ordinary jitted step: value_and_grad
//                            on the shard, dist::all_reduce (mean) of the gradients and loss
//                            inside the trace, the optax update; gives the one-process step,
//                            also with the gradients in one bucket, and each rank's measured
//                            peak is the step's plan
//   dist_probe stall         rank 1 stops taking part: rank 0's all_reduce must time out with
//                            flaxpp's message and end the job (abort_job)
//   dist_probe die           rank 1 is killed: mpirun must end the job, naming rank 1
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "flaxpp/dist/all_reduce.hpp"
#include "flaxpp/dist/communicator.hpp"
#include "flaxpp/dist/process_group.hpp"
#include "flaxpp/dist/replicated.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/losses.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/train/train_state.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "src/tools/mlp_apply.hpp"
#include "tests/harness/measured_peak.hpp"

using namespace flaxpp;

namespace {

int failures = 0, checks = 0;
void expect(bool ok, const std::string& what) {
  ++checks;
  if (!ok) {
    ++failures;
    std::cerr << "rank " << dist::rank() << ": FAILED " << what << "\n";
  }
}

int collectives() {
  dist::Communicator& c = dist::world();
  const int r = dist::rank(), n = dist::world_size();
  // x[i] = r + i on rank r: sum = n (n - 1) / 2 + n i, max = n - 1 + i.
  auto sum_of = [&](int i) { return static_cast<float>(n * (n - 1) / 2 + n * i); };
  std::vector<float> f(5), gathered;
  std::vector<double> d(5);
  std::vector<std::int32_t> i32(5);
  std::vector<std::uint32_t> u32(5);
  for (int i = 0; i < 5; ++i) {
    f[i] = static_cast<float>(r + i);
    d[i] = r + i;
    i32[i] = r + i;
    u32[i] = static_cast<std::uint32_t>(r + i);
  }
  const Array xf = Array::from_vector(f, Shape{5}, Device::cpu());
  for (int i = 0; i < 5; ++i) {
    expect(c.all_reduce(xf, dist::ReduceOp::sum).to_vector<float>()[i] == sum_of(i), "f32 sum");
    expect(c.all_reduce(xf, dist::ReduceOp::max).to_vector<float>()[i] == static_cast<float>(n - 1 + i), "f32 max");
    expect(c.all_reduce(xf, dist::ReduceOp::mean).to_vector<float>()[i] ==
               sum_of(i) / static_cast<float>(n),
           "f32 mean");
  }
  expect(c.all_reduce(Array::from_vector(d, Shape{5}, Device::cpu()), dist::ReduceOp::sum)
                 .to_vector<double>()[4] == static_cast<double>(sum_of(4)),
         "f64 sum");
  expect(c.all_reduce(Array::from_vector(i32, Shape{5}, Device::cpu()), dist::ReduceOp::max)
                 .to_vector<std::int32_t>()[2] == n + 1,
         "i32 max");
  expect(c.all_reduce(Array::from_vector(u32, Shape{5}, Device::cpu()), dist::ReduceOp::sum)
                 .to_vector<std::uint32_t>()[1] == static_cast<std::uint32_t>(sum_of(1)),
         "u32 sum");
  const Array flag = Array::from_vector(std::vector<bool>{r == 1, false}, Shape{2}, Device::cpu());
  expect(c.all_reduce(flag, dist::ReduceOp::max).to_vector<bool>() == std::vector<bool>{true, false},
         "bool max (any)");
  // 16-bit floats: small integers are exact in bf16 and f16.
  for (const DType half : {DType::bf16, DType::f16}) {
    const Array h = Array::full(Shape{3}, r + 1.0, half, Device::cpu());
    const Array back = c.all_reduce(h, dist::ReduceOp::sum);
    expect(back.dtype() == half, "16-bit sum keeps its dtype");
    const Array bits = Array::full(Shape{3}, n * (n + 1) / 2.0, half, Device::cpu());
    std::vector<std::uint8_t> a(6), b(6);
    back.buffer().backend().copy_to_host(back.buffer(), a.data(), 6);
    bits.buffer().backend().copy_to_host(bits.buffer(), b.data(), 6);
    expect(a == b, "16-bit sum");
  }
  const Array root_value = Array::full(Shape{2, 2}, r == 0 ? 42.0 : -1.0, DType::f32, Device::cpu());
  expect(c.broadcast(root_value, 0).to_vector<float>() == std::vector<float>(4, 42.0f),
         "broadcast from 0");
  // A bucket: several arrays of two dtypes reduced together equal each reduced alone.
  {
    const Array a = Array::from_vector(std::vector<float>{0.1f * static_cast<float>(r), 3.0f},
                                       Shape{2}, Device::cpu());
    const Array b = Array::full(Shape{2, 3}, 1.5 * (r + 1), DType::f32, Device::cpu());
    const Array k = Array::full(Shape{4}, r + 2, DType::i32, Device::cpu());
    const std::vector<Array> together =
        dist::all_reduce(std::vector<Array>{a, k, b}, dist::ReduceOp::sum);
    expect(together.size() == 3 && together[1].dtype() == DType::i32 &&
               together[2].shape() == Shape{2, 3},
           "bucket: one result per array, each of its aval");
    expect(together[0].to_vector<float>() == c.all_reduce(a, dist::ReduceOp::sum).to_vector<float>(),
           "bucket f32 (first)");
    expect(together[2].to_vector<float>() == c.all_reduce(b, dist::ReduceOp::sum).to_vector<float>(),
           "bucket f32 (second)");
    expect(together[1].to_vector<std::int32_t>() ==
               c.all_reduce(k, dist::ReduceOp::sum).to_vector<std::int32_t>(),
           "bucket i32");
  }
  const Array g = c.all_gather(Array::full(Shape{2}, r, DType::i32, Device::cpu()));
  expect(g.shape() == Shape{n, 2}, "all_gather shape");
  expect(g.to_vector<std::int32_t>()[2 * (n - 1)] == n - 1, "all_gather order");
  c.barrier();
  std::cout << "rank " << r << ": " << checks - failures << " of " << checks << " checks passed\n";
  return failures == 0 ? 0 : 1;
}

// Rows [begin, end) of a row-major [rows, cols] host matrix, as an array.
template <typename T>
Array rows_of(const std::vector<T>& all, std::int64_t cols, std::int64_t begin, std::int64_t end) {
  return Array::from_vector(std::vector<T>(all.begin() + begin * cols, all.begin() + end * cols),
                            cols == 1 ? Shape{end - begin} : Shape{end - begin, cols},
                            Device::cpu());
}

void expect_no_throw(const std::function<void()>& f, const std::string& what) {
  try {
    f();
    expect(true, what);
  } catch (const Error& e) {
    expect(false, what + ": " + e.what());
  }
}

bool close(float a, float b) { return std::abs(a - b) <= 2e-5f * (1.0f + std::abs(b)); }

// One optimiser per update path: Adam updates leaf by leaf during the backward pass (each
// gradient reduced as it is final), clipping by the global norm needs every gradient first.
int ddp() {
  const int r = dist::rank(), n = dist::world_size();
  constexpr std::int64_t kFeatures = 5, kClasses = 3;
  const std::int64_t batch = 4 * n + 1;  // shards of 5 rows on rank 0, 4 on the others
  std::vector<float> xs(batch * kFeatures);
  std::vector<std::int32_t> ys(batch);
  for (std::int64_t i = 0; i < batch; ++i) {
    for (std::int64_t j = 0; j < kFeatures; ++j)
      xs[i * kFeatures + j] = std::sin(0.7f * static_cast<float>(i) + 1.3f * static_cast<float>(j));
    ys[i] = static_cast<std::int32_t>((i * 7) % kClasses);
  }
  const std::int64_t begin = r == 0 ? 0 : 5 + 4 * (r - 1), end = r == 0 ? 5 : begin + 4;
  const Array x = rows_of(xs, kFeatures, 0, batch), y = rows_of(ys, 1, 0, batch);
  const Array x_shard = rows_of(xs, kFeatures, begin, end), y_shard = rows_of(ys, 1, begin, end);

  const nn::MLP mlp{.features = {8, kClasses}};
  const Tree params = nn::Model(mlp).init(random::key(0), x)["params"];
  const std::vector<std::pair<std::string, optim::GradientTransformation>> optimisers = {
      {"adam (leaf by leaf)", optim::adam(0.05)},
      {"clip_by_global_norm + sgd (whole tree)",
       optim::chain({optim::clip_by_global_norm(0.5), optim::sgd(0.1, 0.9)})}};
  for (const auto& [name, tx] : optimisers) {
    train::ClassifierStep one(train::mlp_apply(mlp, checkpoint_policies::none()), tx);
    train::ClassifierStep shard(train::mlp_apply(mlp, checkpoint_policies::none()), tx);
    shard.set_communicator(&dist::world());
    train::TrainState whole_state = one.init(params), shard_state = shard.init(params);
    for (int step = 0; step < 4; ++step) {
      const float expected = one(whole_state, x, y);
      const float got = shard(shard_state, x_shard, y_shard);
      expect(close(got, expected), name + ": step " + std::to_string(step) + "'s loss " +
                                       std::to_string(got) + ", one process " +
                                       std::to_string(expected));
    }
    const std::vector<Array> mine = shard_state.params.leaves();
    const std::vector<Array> want = whole_state.params.leaves();
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const std::vector<float> a = mine[i].to_vector<float>(), b = want[i].to_vector<float>();
      expect(std::ranges::equal(a, b, close), name + ": leaf " + std::to_string(i) +
                                                  " matches the one-process step");
      expect(dist::world().broadcast(mine[i], 0).to_vector<float>() == a,
             name + ": leaf " + std::to_string(i) + " has rank 0's bits");
    }
    expect_no_throw([&] { dist::check_replicated(dist::world(), shard_state.params, "params"); },
                    name + ": check_replicated passes identical replicas");
    const auto [loss, accuracy] = shard.evaluate(shard_state.params, x_shard, y_shard);
    const auto [loss1, accuracy1] = one.evaluate(whole_state.params, x, y);
    expect(close(loss, loss1) && close(accuracy, accuracy1), name + ": evaluate's metrics");
  }
  // A replica whose parameters moved: every process learns which and where.
  std::vector<Array> leaves = params.leaves();
  if (r == n - 1) leaves.back() = leaves.back() + 1e-7f;
  bool caught = false;
  try {
    dist::check_replicated(dist::world(), params.with_leaves(leaves), "parameters");
  } catch (const DistributedError& e) {
    caught = std::string(e.what()).find(std::to_string(n - 1) + " differ from process 0's at " +
                                        params.flatten().back().first) != std::string::npos;
  }
  expect(caught, "check_replicated names the differing process and leaf");
  const Tree broadcast = dist::broadcast_tree(dist::world(), params.with_leaves(leaves));
  expect(broadcast.leaves().back().to_vector<float>() == params.leaves().back().to_vector<float>(),
         "broadcast_tree gives rank 0's tree");
  std::cout << "rank " << r << ": " << checks - failures << " of " << checks << " checks passed\n";
  return failures == 0 ? 0 : 1;
}


// JAX's data-parallel step, jitted: the gradients are averaged by the all_reduce primitive
// inside the trace (as lax.pmean in a pmap'd or shard_map'd step), equal shards of 6 rows.
int jit_ddp() {
  const int r = dist::rank(), n = dist::world_size();
  constexpr std::int64_t kRows = 6, kFeatures = 4;
  const std::int64_t batch = kRows * n;
  std::vector<float> xs(batch * kFeatures);
  std::vector<std::int32_t> ys(batch);
  for (std::int64_t i = 0; i < batch; ++i) {
    for (std::int64_t j = 0; j < kFeatures; ++j)
      xs[i * kFeatures + j] = std::cos(0.3f * static_cast<float>(i * kFeatures + j));
    ys[i] = static_cast<std::int32_t>(i % 3);
  }
  const nn::MLP mlp{.features = {8, 3}};
  const optim::GradientTransformation tx = optim::sgd(0.1, 0.9);
  // How the gradients are reduced: not at all (the one-process step), each leaf by its own
  // mean (lax.pmean), or all leaves in one bucket (DDP's), summed and divided after.
  enum class Reduce { none, per_leaf, bucket };
  auto step_fn = [&](Reduce reduce, bool overlap = true) {
    JitOptions options;
    options.overlap_collectives = overlap;
    return jit(
        [&, reduce](std::span<const Tree> a) {
          auto loss_of = [&](const Tree& p) {
            const Array logits = nn::Model(mlp).apply(nn::Variables{{"params", p}}, a[2].array());
            return mean(optim::softmax_cross_entropy_with_integer_labels(logits, a[3].array()));
          };
          auto [loss, grads] = value_and_grad(loss_of)(a[0]);
          if (reduce == Reduce::per_leaf)
            grads = tree_map(
                grads, [](const Array& g) { return dist::all_reduce(g, dist::ReduceOp::mean); });
          if (reduce == Reduce::bucket) {
            std::vector<Array> leaves = dist::all_reduce(grads.leaves(), dist::ReduceOp::sum);
            for (Array& g : leaves)
              g = g / static_cast<double>(dist::world_size());
            grads = grads.with_leaves(leaves);
          }
          if (reduce != Reduce::none) loss = dist::all_reduce(loss, dist::ReduceOp::mean);
          auto [params, state] = optim::apply_gradients(tx, std::move(grads), a[1], a[0]);
          return std::vector<Tree>{params, state, Tree(loss)};
        },
        options);
  };
  const Jitted sharded = step_fn(Reduce::per_leaf), whole = step_fn(Reduce::none);
  const Array x = rows_of(xs, kFeatures, 0, batch), y = rows_of(ys, 1, 0, batch);
  const Array x_shard = rows_of(xs, kFeatures, r * kRows, (r + 1) * kRows);
  const Array y_shard = rows_of(ys, 1, r * kRows, (r + 1) * kRows);
  const Tree init = nn::Model(mlp).init(random::key(2), x)["params"];
  Tree p1 = init, s1 = tx.init(init), p2 = init, s2 = tx.init(init);
  for (int i = 0; i < 4; ++i) {
    std::vector<Tree> a = whole({p1, s1, x, y}), b = sharded({p2, s2, x_shard, y_shard});
    expect(close(b[2].array().item<float>(), a[2].array().item<float>()),
           "jitted step " + std::to_string(i) + "'s loss");
    p1 = a[0], s1 = a[1], p2 = b[0], s2 = b[1];
  }
  expect(sharded.num_traces() == 1, "the data-parallel step traced once");
  // The gradients' exchange overlaps the backward pass: a product runs while an all_reduce
  // started and is not yet waited for.
  int in_flight = 0;
  bool overlapped = false;
  for (const ir::Eqn& e : sharded.lower(std::vector<Tree>{p2, s2, x_shard, y_shard}).graph().eqns) {
    in_flight += e.prim == &dist::all_reduce_start_p  ? 1
                 : e.prim == &dist::all_reduce_done_p ? -1
                                                      : 0;
    overlapped = overlapped || (in_flight > 0 && e.prim == &lax::dot_general_p);
  }
  expect(overlapped, "a backward product runs while a gradient's all_reduce is in flight");
  const std::vector<Array> mine = p2.leaves(), want = p1.leaves();
  for (std::size_t i = 0; i < mine.size(); ++i)
    expect(std::ranges::equal(mine[i].to_vector<float>(), want[i].to_vector<float>(), close),
           "jitted leaf " + std::to_string(i) + " matches the one-process step");
  expect_no_throw([&] { dist::check_replicated(dist::world(), p2, "params"); },
                  "the jitted replicas hold the same bits");
  // The plan counts the exchange exactly (its buckets, reduced in place, and the results),
  // with the exchange overlapped or not: the peak each rank measures is its plan.
  for (const auto& [name, step] :
       {std::pair{"per leaf", sharded}, std::pair{"bucket", step_fn(Reduce::bucket)},
        std::pair{"bucket, blocking", step_fn(Reduce::bucket, false)}}) {
    std::vector<Tree> args{p2, s2, x_shard, y_shard};
    const CompiledStep compiled = step.lower(args);
    const MemoryAnalysis& m = compiled.memory_analysis();
    const std::int64_t measured = testing::measured_peak(compiled, args);
    expect(m.exact && measured == m.peak_bytes, std::string(name) + ": measured peak " +
                                                    std::to_string(measured) + " bytes, plan " +
                                                    m.str());
    const std::vector<Array> got = compiled(args)[0].leaves(), per_leaf = sharded(args)[0].leaves();
    for (std::size_t i = 0; i < got.size(); ++i)
      expect(std::ranges::equal(got[i].to_vector<float>(), per_leaf[i].to_vector<float>()),
             std::string(name) + ": leaf " + std::to_string(i) + " as the per-leaf step's");
  }
  std::cout << "rank " << r << ": " << checks - failures << " of " << checks << " checks passed\n";
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string mode = argc > 1 ? argv[1] : "collectives";
  dist::init();
  if (mode == "collectives") return collectives();
  if (mode == "ddp") return ddp();
  if (mode == "jit_ddp") return jit_ddp();
  if (mode == "stall" || mode == "die") {
    if (dist::rank() == 1) {
      if (mode == "die") std::raise(SIGKILL);
      std::this_thread::sleep_for(std::chrono::seconds(120));  // stops taking part
      return 0;
    }
    try {
      (void)dist::world().all_reduce(Array::full(Shape{4}, 1.0, DType::f32, Device::cpu()),
                                     dist::ReduceOp::sum);
    } catch (const DistributedError& e) {
      std::cerr << "flaxpp: " << e.what() << "\n";
      dist::abort_job(3);
    }
    std::cerr << "rank 0: the all_reduce completed although rank 1 did not take part\n";
    return 1;
  }
  std::cerr << "dist_probe: unknown mode " << mode << "\n";
  return 2;
} catch (const Error& e) {
  std::cerr << "rank " << dist::rank() << ": " << e.what() << "\n";
  return 1;
}
