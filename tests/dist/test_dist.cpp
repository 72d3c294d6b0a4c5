// The dist layer in a job of one (a process started on its own): every collective is the
// identity on every dtype, bad calls are clear errors, and the all_reduce primitive traces,
// differentiates and jits like any lax primitive. The multi-process behaviour is
// tests/dist/dist_probe.cpp under mpirun (ctest's flaxpp_dist_* jobs).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "flaxpp/dist/all_reduce.hpp"
#include "flaxpp/dist/communicator.hpp"
#include "flaxpp/dist/process_group.hpp"
#include "flaxpp/dist/replicated.hpp"
#include "flaxpp/ir/graph.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "harness/planned_peak.hpp"

using namespace flaxpp;

TEST_CASE("dist: a process on its own is a job of one") {
  dist::init();
  CHECK(dist::is_initialized());
  CHECK(dist::rank() == 0);
  CHECK(dist::world_size() == 1);
  CHECK(dist::describe() == "1 process");
  CHECK(dist::world().size() == 1);
}

TEST_CASE("dist: in a job of one every collective gives the array back, for every dtype") {
  dist::Communicator& c = dist::world();
  const std::vector<Array> xs = {
      Array::from_vector(std::vector<float>{1.5f, -2.0f}, Shape{2}),
      Array::from_vector(std::vector<double>{3.0}, Shape{}),
      Array::from_vector(std::vector<std::int32_t>{7, -8, 9}, Shape{3}),
      Array::from_vector(std::vector<std::uint32_t>{4}, Shape{1, 1}),
      Array::from_vector(std::vector<bool>{true, false}, Shape{2}),
      Array::full(Shape{2}, 0.5, DType::bf16, Device::cpu()),
      Array::full(Shape{2}, 0.25, DType::f16, Device::cpu())};
  for (const Array& x : xs) {
    CAPTURE(x.aval());
    const dist::ReduceOp op = x.dtype() == DType::bool_ ? dist::ReduceOp::max : dist::ReduceOp::sum;
    CHECK(c.all_reduce(x, op).aval() == x.aval());
    CHECK(c.all_reduce(x, dist::ReduceOp::max).aval() == x.aval());
    CHECK(c.broadcast(x, 0).aval() == x.aval());
    std::vector<std::int64_t> stacked{1};
    stacked.insert(stacked.end(), x.shape().dims().begin(), x.shape().dims().end());
    CHECK(c.all_gather(x).shape() == Shape(stacked));
  }
  CHECK(c.all_reduce(xs[0], dist::ReduceOp::mean).to_vector<float>() ==
        std::vector<float>{1.5f, -2.0f});
  c.barrier();
}

TEST_CASE("dist: collectives refuse what they cannot do, saying what to do") {
  dist::Communicator& c = dist::world();
  const Array ints = Array::from_vector(std::vector<std::int32_t>{1}, Shape{1});
  CHECK_THROWS_WITH_AS(c.all_reduce(ints, dist::ReduceOp::mean),
                       doctest::Contains("a mean needs a floating dtype"), ValueError);
  CHECK_THROWS_WITH_AS(
      c.all_reduce(Array::from_vector(std::vector<bool>{true}, Shape{1}), dist::ReduceOp::sum),
      doctest::Contains("use max"), ValueError);
  CHECK_THROWS_WITH_AS(c.broadcast(ints, 1), doctest::Contains("the job has ranks 0..0"),
                       ValueError);
  CHECK_THROWS_AS(dist::reduce_op_from_name("avg"), ValueError);
}

TEST_CASE("dist::all_reduce: a primitive that traces, differentiates and jits") {
  const Array x = Array::from_vector(std::vector<float>{1.0f, -2.0f, 3.0f}, Shape{3});
  // d/dx sum(all_reduce(x)^2) = 2 x in a job of one (the VJP is all_reduce of the cotangent).
  const Array g = grad([](const Array& v) {
    return sum(square(dist::all_reduce(v, dist::ReduceOp::sum)));
  })(x);
  CHECK(g.to_vector<float>() == std::vector<float>{2.0f, -4.0f, 6.0f});
  CHECK_THROWS_WITH_AS(grad([](const Array& v) {
                         return sum(dist::all_reduce(v, dist::ReduceOp::max));
                       })(x),
                       doctest::Contains("has no gradient"), ValueError);
  const Jitted f = jit([](std::span<const Tree> a) {
    return std::vector<Tree>{Tree(dist::all_reduce(a[0].array(), dist::ReduceOp::mean))};
  });
  // jit splits it into a start and a done (overlap_collectives).
  const ir::Graph& graph = f.lower(std::vector<Tree>{Tree(x)}).graph();
  CHECK(ir::count_eqns(graph, dist::all_reduce_p) == 0);
  CHECK(ir::count_eqns(graph, dist::all_reduce_start_p) == 1);
  CHECK(ir::count_eqns(graph, dist::all_reduce_done_p) == 1);
  CHECK(f(std::vector<Tree>{Tree(x)})[0].array().to_vector<float>() == x.to_vector<float>());
}

TEST_CASE("dist::all_reduce of several arrays: one equation, differentiable, and in a jitted "
          "step scheduled as soon as its operands are final") {
  const Array x = Array::from_vector(std::vector<float>{1.0f, -2.0f, 3.0f}, Shape{3});
  const Array y = Array::from_vector(std::vector<float>{0.5f, 4.0f}, Shape{2});
  const std::vector<Array> both = dist::all_reduce(std::vector<Array>{x, y}, dist::ReduceOp::sum);
  CHECK(both[0].to_vector<float>() == x.to_vector<float>());
  CHECK(both[1].to_vector<float>() == y.to_vector<float>());
  // d/dx sum(r0^2) + sum(r1^3): the VJP reduces both cotangents together.
  const auto loss = [](std::span<const Tree> a) {
    const std::vector<Array> r =
        dist::all_reduce(std::vector<Array>{a[0].array(), a[1].array()}, dist::ReduceOp::sum);
    return sum(square(r[0])) + sum(power(r[1], 3));
  };
  const ValueAndGrad vg = value_and_grad(loss, std::vector<Tree>{Tree(x), Tree(y)},
                                         std::vector<int>{0, 1});
  CHECK(vg.grads[0].array().to_vector<float>() == std::vector<float>{2.0f, -4.0f, 6.0f});
  CHECK(vg.grads[1].array().to_vector<float>() == std::vector<float>{0.75f, 48.0f});
  // In a jitted function the bucket's all_reduce starts right after the later of its operands,
  // and is waited for after work that does not need it (overlap_collectives): the product runs
  // while the processes exchange. Without the overlap it completes before the product.
  const auto step = [](std::span<const Tree> a) {
    const Array g0 = exp(a[0].array()), g1 = a[1].array() * 2.0;
    const Array other = matmul(a[2].array(), a[2].array());
    const std::vector<Array> r = dist::all_reduce(std::vector<Array>{g0, g1}, dist::ReduceOp::sum);
    return std::vector<Tree>{Tree(other), Tree(r[0]), Tree(r[1] * 3.0)};
  };
  const Array m = Array::full(Shape{4, 4}, 0.5, DType::f32);
  const std::vector<Tree> args{Tree(x), Tree(y), Tree(m)};
  const auto position = [](const ir::Graph& g, const ir::Primitive& p) {
    for (std::size_t i = 0; i < g.eqns.size(); ++i)
      if (g.eqns[i].prim == &p) return i;
    return g.eqns.size();
  };
  const Jitted overlapped = jit(step);
  const ir::Graph& g = overlapped.lower(args).graph();
  CHECK(ir::count_eqns(g, dist::all_reduce_start_p) == 1);
  CHECK(position(g, dist::all_reduce_start_p) < position(g, lax::dot_general_p));
  CHECK(position(g, lax::dot_general_p) < position(g, dist::all_reduce_done_p));
  const Jitted blocking = jit(step, {.donate_argnums = {},
                                     .fuse_elementwise = true,
                                     .fuse_dot_bias = true,
                                     .overlap_collectives = false});
  const ir::Graph& h = blocking.lower(args).graph();
  CHECK(ir::count_eqns(h, dist::all_reduce_p) == 1);
  CHECK(position(h, dist::all_reduce_p) < position(h, lax::dot_general_p));
  const std::vector<Tree> a = overlapped(args), b = blocking(args);
  for (std::size_t i = 0; i < a.size(); ++i)
    CHECK(a[i].array().to_vector<float>() == b[i].array().to_vector<float>());
}

TEST_CASE("dist::all_reduce in a jitted step: its buckets are planned to the byte") {
  if (default_device() != Device::cpu()) return;  // the CPU allocator's count
  // The exchange at the step's peak: two operands copied into their bucket, reduced in place,
  // and their results made while the bucket is held.
  const auto step = [](std::span<const Tree> a) {
    const Array g0 = exp(a[0].array()), g1 = a[1].array() * 2.0;
    const std::vector<Array> r = dist::all_reduce(std::vector<Array>{g0, g1}, dist::ReduceOp::sum);
    return std::vector<Tree>{Tree(sum(r[0]) + sum(r[1]))};
  };
  const std::vector<Tree> args{Tree(Array::full(Shape{64, 64}, 0.25, DType::f32)),
                               Tree(Array::full(Shape{32, 64}, 0.5, DType::f32))};
  const std::int64_t bucket = (64 + 32) * 64 * 4;
  for (const bool overlap : {true, false}) {
    CAPTURE(overlap);
    JitOptions options;
    options.overlap_collectives = overlap;
    const CompiledStep compiled = jit(step, options).lower(args);
    const MemoryAnalysis& m = compiled.memory_analysis();
    CAPTURE(m.str());
    // The arguments, the operands (the blocking exchange holds them), the bucket and the
    // results; the start lets its operands go.
    CHECK(m.peak_bytes - m.resident_bytes() == (overlap ? 2 : 3) * bucket);
    testing::check_planned_peak(compiled, args);
  }
  // A mean is the sum divided after (jax.lax.pmean is psum's): in a job of one, the sum alone.
  const Jitted mean_of = jit([](std::span<const Tree> a) {
    return std::vector<Tree>{Tree(dist::all_reduce(a[0].array(), dist::ReduceOp::mean))};
  });
  const ir::Graph& g = mean_of.lower(args).graph();
  CHECK(ir::count_eqns(g, lax::div_p) == 0);
  for (const ir::Eqn& e : g.eqns)
    if (e.prim == &dist::all_reduce_start_p) CHECK(e.params.get<std::string>("op") == "sum");
}

TEST_CASE("dist::shard_bounds: contiguous shards in rank order, the first ones a row longer") {
  CHECK(dist::shard_bounds(9, 0, 2) == std::pair<std::int64_t, std::int64_t>{0, 5});
  CHECK(dist::shard_bounds(9, 1, 2) == std::pair<std::int64_t, std::int64_t>{5, 9});
  CHECK(dist::shard_bounds(10, 2, 4) == std::pair<std::int64_t, std::int64_t>{6, 8});
  CHECK(dist::shard_bounds(10, 3, 4) == std::pair<std::int64_t, std::int64_t>{8, 10});
  CHECK(dist::shard_bounds(1, 1, 3) == std::pair<std::int64_t, std::int64_t>{1, 1});
  for (const std::int64_t rows : {0, 1, 7, 64, 1437})
    for (const int size : {1, 2, 3, 8}) {
      std::int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        const auto [begin, end] = dist::shard_bounds(rows, r, size);
        CHECK(begin == next);
        CHECK(end - begin >= rows / size);
        CHECK(end - begin <= rows / size + 1);
        next = end;
      }
      CHECK(next == rows);
    }
  CHECK_THROWS_WITH_AS(dist::shard_bounds(9, 2, 2), doctest::Contains("expected 0 <= rank < size"),
                       ValueError);
}

TEST_CASE("dist: a tree broadcast or checked in a job of one is itself") {
  Tree t;
  const std::vector<std::string> ab = {"a", "b"};
  t.set_at(ab, Tree(Array::from_vector(std::vector<float>{1.0f, 2.0f}, Shape{2})));
  t.set("c", Tree(Array::full(Shape{3}, 4.0, DType::bf16, Device::cpu())));
  const Tree back = dist::broadcast_tree(dist::world(), t);
  CHECK(back.flatten().size() == 2);
  CHECK(back.at("a/b").array().to_vector<float>() == std::vector<float>{1.0f, 2.0f});
  CHECK_NOTHROW(dist::check_replicated(dist::world(), t, "parameters"));
}
