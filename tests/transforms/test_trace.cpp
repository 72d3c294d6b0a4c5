// Tracing into graphs: the jaxpr-style printer, the verifier, constants and literals,
// omnistaging, escaped tracers, and eval_graph's release of every value after its last use.
#include <doctest/doctest.h>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/trace.hpp"

using namespace flaxpp;

namespace {
const AVal kF32_5x3{Shape{5, 3}, DType::f32};
const AVal kF32_3x3{Shape{3, 3}, DType::f32};
}  // namespace

TEST_CASE("make_graph: a traced function prints as a jaxpr") {
  const ir::Graph g = make_graph(
      [](std::span<const Array> v) { return std::vector<Array>{relu(matmul(v[0], v[1])) * 2.0}; },
      std::vector<AVal>{kF32_5x3, kF32_3x3});
  g.verify();
  const std::string text = g.str();
  CHECK(text.find("{ lambda ; a:f32[5,3] b:f32[3,3]. let") == 0);
  CHECK(text.find("c:f32[5,3] = dot_general[dimension_numbers=(((1,), (0,)), ((), ()))] a b") !=
        std::string::npos);
  CHECK(text.find("custom_vjp_call[") != std::string::npos);
  CHECK(text.find("mul d 2.0:f32[]") != std::string::npos);
  CHECK(text.find("in (e,) }") != std::string::npos);
}

TEST_CASE("make_graph: captured arrays become constants, 0-d ones literals") {
  const Array w = Array::full(Shape{3}, 0.5, DType::f32);
  const Array s = Array::scalar(3.0f);
  const ir::Graph g =
      make_graph([&](std::span<const Array> v) { return std::vector<Array>{(v[0] * w) * s}; },
                 std::vector<AVal>{{Shape{3}, DType::f32}});
  g.verify();
  REQUIRE(g.consts.size() == 1);
  CHECK(&g.consts[0].buffer() == &w.buffer());
  CHECK(g.str().find("3.0:f32[]") != std::string::npos);
}

TEST_CASE("make_graph: computations on constants inside a trace are staged too (omnistaging)") {
  const Array c = Array::full(Shape{4}, 2.0, DType::f32);
  const ir::Graph g =
      make_graph([&](std::span<const Array> v) { return std::vector<Array>{v[0] + exp(c)}; },
                 std::vector<AVal>{{Shape{4}, DType::f32}});
  CHECK(ir::count_eqns(g, lax::exp_p) == 1);
}

TEST_CASE("eval_graph: equals eager evaluation") {
  const Array x = Array::from_vector(std::vector<float>{1, -2, 3, -4, 5, -6}, Shape{2, 3});
  const Array w = Array::from_vector(std::vector<float>{1, 0, 0, 1, 1, 1}, Shape{3, 2});
  auto f = [](std::span<const Array> v) {
    return std::vector<Array>{sum(relu(matmul(v[0], v[1])), Axes{1})};
  };
  const ir::Graph g = make_graph(f, std::vector<AVal>{x.aval(), w.aval()});
  const std::vector<Array> args{x, w};
  CHECK(eval_graph(g, args)[0].to_vector<float>() == f(args)[0].to_vector<float>());
}

TEST_CASE("eval_graph: each intermediate is released after its last use") {
  // A chain of 8 elementwise steps on a 1 MiB array: at most the input, the value being read
  // and the value being written are alive at once.
  const Array x = Array::full(Shape{256, 1024}, 0.5, DType::f32);
  const ir::Graph g = make_graph(
      [](std::span<const Array> v) {
        Array y = v[0];
        for (int i = 0; i < 8; ++i)
          y = tanh(y);
        return std::vector<Array>{y};
      },
      std::vector<AVal>{x.aval()});
  Backend& dev = backend(default_device());
  const std::int64_t live0 = dev.memory_stats().live_bytes;
  dev.reset_peak_memory();
  const Array y = eval_graph(g, std::span<const Array>(&x, 1))[0];
  CHECK(dev.memory_stats().peak_bytes - live0 <= 2 * x.nbytes());
  CHECK(dev.memory_stats().live_bytes - live0 == y.nbytes());
}

TEST_CASE("vjp: between forward and backward only the residuals are alive") {
  const Array x = Array::full(Shape{256, 256}, 0.25, DType::f32);
  Backend& dev = backend(default_device());
  const std::int64_t live0 = dev.memory_stats().live_bytes;
  const VjpResult r = vjp(
      [](std::span<const Array> v) {
        Array y = v[0];
        for (int i = 0; i < 4; ++i)
          y = exp(y);  // each exp's VJP needs its output, nothing else
        return std::vector<Array>{sum(y)};
      },
      std::span<const Array>(&x, 1));
  // The 4 exp outputs are the residuals (sum's VJP needs nothing). (tanh would save two per
  // step, ans and the known factor 1 - ans of its VJP, exactly as JAX's partial evaluation does.)
  CHECK(r.residual_bytes == 4 * x.nbytes());
  CHECK(dev.memory_stats().live_bytes - live0 == r.residual_bytes + r.outputs[0].nbytes());
}

TEST_CASE("tracing: reading values of a traced array is a clear error") {
  CHECK_THROWS_WITH_AS(grad([](const Array& v) {
                         (void)v.to_vector<float>();
                         return sum(v);
                       })(Array::full(Shape{2}, 1.0, DType::f32)),
                       doctest::Contains("values of a traced array"), TracerError);
}

TEST_CASE("tracing: a tracer that escapes its trace is a clear error when used") {
  Array leaked;
  (void)make_graph(
      [&](std::span<const Array> v) {
        leaked = v[0];
        return std::vector<Array>{v[0]};
      },
      std::vector<AVal>{{Shape{2}, DType::f32}});
  CHECK_THROWS_WITH_AS(exp(leaked), doctest::Contains("escaped"), TracerError);
}
