// The graph passes in isolation (flaxpp/ir/passes.hpp), each on a small traced graph: dce,
// cse, elementwise fusion, the rewrite of sub-graphs and the overlap of collectives. The
// passes' effect on whole train steps is tested with jit (tests/transforms).
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/trace.hpp"

using namespace flaxpp;

namespace {

const std::vector<AVal> kTwoF32{AVal{Shape{4}, DType::f32}, AVal{Shape{4}, DType::f32}};

std::vector<Array> inputs() {
  return {Array::from_vector(std::vector<float>{0.5f, -1.0f, 2.0f, 0.0f}, Shape{4}),
          Array::from_vector(std::vector<float>{1.5f, 3.0f, -0.25f, 4.0f}, Shape{4})};
}

// Runs `g` before and after `pass` and checks that the results keep their bits.
template <class Pass>
void check_same_results(ir::Graph& g, Pass&& pass) {
  const std::vector<Array> before = eval_graph(g, inputs());
  pass(g);
  g.verify();
  const std::vector<Array> after = eval_graph(g, inputs());
  REQUIRE(before.size() == after.size());
  for (std::size_t k = 0; k < before.size(); ++k)
    CHECK(before[k].to_vector<float>() == after[k].to_vector<float>());
}

// An exchange split in two by overlap_collectives, defined here: identities.
std::vector<AVal> same_avals(std::span<const AVal> in, const ir::Params&) {
  return {in.begin(), in.end()};
}
std::vector<Array> identity(std::span<const Array> in, const ir::Params&) {
  return {in.begin(), in.end()};
}
const ir::Primitive toy_sync_p("toy_sync", same_avals, {}, identity);
const ir::Primitive toy_start_p("toy_start", same_avals, {}, identity);
const ir::Primitive toy_done_p("toy_done", same_avals, {}, identity);
const bool toy_async_registered = [] {
  ir::register_effects(toy_sync_p, {.collective = true});
  ir::register_async_collective(toy_sync_p, toy_start_p, toy_done_p);
  return true;
}();

}  // namespace

TEST_CASE("dce: equations and constants nothing reads go, the results stay") {
  const Array unused_constant = Array::from_vector(std::vector<float>{9, 9, 9, 9}, Shape{4});
  ir::Graph g = make_graph(
      [&](std::span<const Array> v) {
        (void)exp(v[0]);                 // read by nothing
        (void)(v[1] + unused_constant);  // nor this, nor its constant
        return std::vector<Array>{v[0] * v[1]};
      },
      kTwoF32);
  REQUIRE(g.eqns.size() == 3);
  REQUIRE(g.consts.size() == 1);
  check_same_results(g, [](ir::Graph& graph) { ir::dce(graph); });
  CHECK(g.eqns.size() == 1);
  CHECK(g.eqns[0].prim == &lax::mul_p);
  CHECK(g.consts.empty());
}

TEST_CASE("cse: the same primitive, params and operands merge; other params or literals do not") {
  ir::Graph g = make_graph(
      [](std::span<const Array> v) {
        const Array a = exp(v[0]), b = exp(v[0]);    // the same: merged
        const Array c = v[1] * 2.0, d = v[1] * 2.0;  // the same literal: merged
        const Array e = v[1] * 3.0;                  // another literal: kept
        const Array f = lax::integer_pow(v[0], 2), h = lax::integer_pow(v[0], 3);  // params
        return std::vector<Array>{a + b, c + d + e, f + h};
      },
      kTwoF32);
  const auto count = [&](const ir::Primitive& p) { return ir::count_eqns(g, p); };
  REQUIRE(count(lax::exp_p) == 2);
  int merged = 0;
  check_same_results(g, [&](ir::Graph& graph) { merged = ir::cse(graph); });
  CHECK(merged == 2);
  CHECK(count(lax::exp_p) == 1);
  CHECK(count(lax::mul_p) == 2);
  CHECK(count(lax::integer_pow_p) == 2);
}

TEST_CASE("fuse_elementwise: a chain of one shape and dtype is one program; others stay") {
  ir::Graph g = make_graph(
      [](std::span<const Array> v) {
        const Array chain = tanh(v[0] * 2.0 + v[1]);      // three equations: fused
        const Array total = lax::reduce_sum(chain, {0});  // not elementwise
        return std::vector<Array>{chain, total * 0.5};    // a 0-d chain alone: kept
      },
      kTwoF32);
  int fused = 0;
  check_same_results(g, [&](ir::Graph& graph) { fused = ir::fuse_elementwise(graph); });
  CHECK(fused == 1);
  CAPTURE(g.str());
  REQUIRE(ir::count_eqns(g, lax::fused_elementwise_p) == 1);
  for (const ir::Eqn& e : g.eqns)
    if (e.prim == &lax::fused_elementwise_p) {
      CHECK(e.params.get<std::int64_t>("fused_eqns") == 3);
      const auto& program = *e.params.get<std::shared_ptr<const ir::ElementwiseProgram>>("program");
      CHECK(program.str().find("tanh(") != std::string::npos);
    }
  CHECK(ir::count_eqns(g, lax::reduce_sum_p) == 1);
  CHECK(ir::count_eqns(g, lax::tanh_p) == 0);
  const ir::OpCounts n = ir::op_counts(g);
  CHECK(n.unfused == n.executed + 2);
}

TEST_CASE("fuse_elementwise: programs read row values and biases through their broadcasts") {
  // softmax's pattern (x - max, exp, / sum, each row value broadcast along the last axis) and
  // a bias broadcast along the leading axes: no broadcast is materialised, the bits stay.
  const std::vector<AVal> avals{AVal{Shape{2, 3}, DType::f32}, AVal{Shape{3}, DType::f32}};
  ir::Graph g = make_graph(
      [](std::span<const Array> v) {
        const Shape full{2, 3};
        const Array m = lax::broadcast_in_dim(lax::reduce_max(v[0], {1}), Shape{2, 1}, {0});
        const Array e = exp(v[0] - lax::broadcast_in_dim(m, full, {0, 1}));
        const Array s = lax::broadcast_in_dim(lax::reduce_sum(e, {1}), Shape{2, 1}, {0});
        const Array y = e / lax::broadcast_in_dim(s, full, {0, 1});
        return std::vector<Array>{y + lax::broadcast_in_dim(v[1], full, {1})};
      },
      avals);
  const std::vector<Array> in{
      Array::from_vector(std::vector<float>{0.5f, -1.0f, 2.0f, 0.0f, 3.0f, -0.25f}, Shape{2, 3}),
      Array::from_vector(std::vector<float>{1.5f, 3.0f, -0.25f}, Shape{3})};
  const std::vector<Array> before = eval_graph(g, in);
  ir::fuse_elementwise(g);
  ir::dce(g);
  g.verify();
  CAPTURE(g.str());
  CHECK(eval_graph(g, in)[0].to_vector<float>() == before[0].to_vector<float>());
  // (2, 1) -> (2, 3) and (3,) -> (2, 3) broadcasts go; the keepdims reshapes to (2, 1) stay.
  for (const ir::Eqn& e : g.eqns)
    if (e.prim == &lax::broadcast_in_dim_p) CHECK(g.aval(e.outputs[0]).shape != Shape{2, 3});
  CHECK(ir::count_eqns(g, lax::fused_elementwise_p) == 2);  // before and after the sum
  CHECK(ir::count_eqns(g, lax::exp_p) == 0);
  CHECK(ir::count_eqns(g, lax::div_p) == 0);
}

TEST_CASE("fuse_elementwise: an equation joins the program of an earlier reader of its operand") {
  // GELU's gradient's shape: g * 2 and g * y read the same g, which no program makes; the
  // second joins the first's program, and so does their sum: one program. A later reader of g
  // that a reduction separates from that program does not join it (its value would be made
  // before the reduction and live across it): it stays, and so does the reduction.
  ir::Graph g = make_graph(
      [](std::span<const Array> v) {
        const Array a = v[0] * 2.0, b = v[0] * v[1];
        const Array sum = a + b;
        return std::vector<Array>{sum, lax::reduce_sum(sum, {0}), v[0] - v[1]};
      },
      kTwoF32);
  int fused = 0;
  check_same_results(g, [&](ir::Graph& graph) { fused = ir::fuse_elementwise(graph); });
  CAPTURE(g.str());
  CHECK(fused == 1);
  REQUIRE(g.eqns.size() == 3);
  CHECK(g.eqns[0].params.get<std::int64_t>("fused_eqns") == 3);
  CHECK(g.eqns[1].prim == &lax::reduce_sum_p);
  CHECK(g.eqns[2].prim == &lax::sub_p);
}

TEST_CASE("fuse_elementwise: a comparison read outside its program stays, also as its first") {
  // m = v[0] > 0 starts a program (the select and the product join it); a second select of m
  // reads a value made after m (a reversal), so it cannot join and reads m from memory: m
  // stays an equation of its own, at the program's place.
  ir::Graph g = make_graph(
      [](std::span<const Array> v) {
        const Array zero = lax::zeros_like(v[0]);
        const Array m = greater(v[0], zero);
        const Array y = lax::select_n(m, std::vector<Array>{zero, v[0]}) * 2.0;
        const Array later = lax::rev(v[1], {0});
        return std::vector<Array>{y, lax::select_n(m, std::vector<Array>{later, v[1]})};
      },
      kTwoF32);
  check_same_results(g, [&](ir::Graph& graph) { CHECK(ir::fuse_elementwise(graph) >= 1); });
  CAPTURE(g.str());
  CHECK(ir::count_eqns(g, lax::gt_p) == 1);
}

TEST_CASE("fuse_elementwise: row reductions join the program that makes or reads their operand") {
  // softmax with a bias: z's row maximum joins z's program, the exponentials' sum theirs, the
  // sum of v[1] (which z's program reads) that program too, and the sum of y * y the division's
  // program, which then never stores y * y. A sum over both axes of z is another row length
  // than z's program's, and the sum of the maximum's broadcast is of no program's value (the
  // exponentials' program reads the maximum itself): they stay. Without the option every
  // reduction stays.
  const Shape full{6, 70};
  const std::vector<AVal> avals{AVal{full, DType::f32}, AVal{full, DType::f32}};
  const auto f = [&](std::span<const Array> v) {
    const Array z = v[0] * 0.5 + v[1];
    const Array m = lax::reduce_max(z, {1});
    const Array m_rows = lax::broadcast_in_dim(m, full, {0});
    const Array e = exp(z - m_rows);
    const Array s = lax::reduce_sum(e, {1});
    const Array y = e / lax::broadcast_in_dim(s, full, {0});
    return std::vector<Array>{y,
                              m,
                              s,
                              lax::reduce_sum(v[1], {1}),
                              lax::reduce_sum(y * y, {1}),
                              lax::reduce_sum(z, {0, 1}),
                              lax::reduce_sum(m_rows, {1})};
  };
  std::vector<float> x0(420), x1(420);
  for (std::size_t i = 0; i < x0.size(); ++i) {
    x0[i] = 3.0f * std::sin(0.3f * static_cast<float>(i));
    x1[i] = std::cos(0.7f * static_cast<float>(i));
  }
  const std::vector<Array> in{Array::from_vector(x0, full, Device::cpu()),
                              Array::from_vector(x1, full, Device::cpu())};
  ir::Graph plain = make_graph(f, avals);
  const std::vector<Array> before = eval_graph(plain, in);
  CHECK(ir::fuse_elementwise(plain) == 3);
  CHECK(ir::count_eqns(plain, lax::reduce_sum_p) == 5);
  CHECK(ir::count_eqns(plain, lax::reduce_max_p) == 1);

  ir::Graph g = make_graph(f, avals);
  CHECK(ir::fuse_elementwise(g, {.row_reductions = true}) == 3);
  ir::dce(g);
  g.verify();
  CAPTURE(g.str());
  CHECK(ir::count_eqns(g, lax::reduce_max_p) == 0);
  CHECK(ir::count_eqns(g, lax::reduce_sum_p) == 2);
  const std::vector<Array> after = eval_graph(g, in);
  REQUIRE(after.size() == before.size());
  for (std::size_t k = 0; k < before.size(); ++k) {
    CAPTURE(k);
    CHECK(after[k].to_vector<float>() == before[k].to_vector<float>());
  }
  int rows_programs = 0;
  for (const ir::Eqn& e : g.eqns) {
    if (e.prim != &lax::fused_elementwise_p) continue;
    const auto& program = *e.params.get<std::shared_ptr<const ir::ElementwiseProgram>>("program");
    if (program.row_reductions.empty()) continue;
    ++rows_programs;
    CHECK(program.row_axes == 1);
    CHECK(e.outputs.size() == program.results_per_group());
    if (program.str().find("div(") != std::string::npos) {
      CHECK(program.outputs.size() == 1);  // y; y * y is summed, never stored
      // div, mul, the broadcast of s it reads through, and the sum.
      CHECK(e.params.get<std::int64_t>("fused_eqns") == 4);
    }
  }
  CHECK(rows_programs == 3);
}

TEST_CASE("rewrite_subgraphs: each distinct body is rewritten once, however often it appears") {
  ir::Graph body = make_graph(
      [](std::span<const Array> v) {
        (void)exp(v[1]);  // dead in the body
        return std::vector<Array>{v[0] + v[1]};
      },
      kTwoF32);
  const auto shared = std::make_shared<const ir::Graph>(body);
  ir::Graph g;
  for (int k = 0; k < 2; ++k)
    g.eqns.push_back({&lax::add_p, {}, {}, ir::Params{{"body", shared}}});
  int calls = 0;
  CHECK(ir::rewrite_subgraphs(g, [&](ir::Graph& sub) {
          ++calls;
          ir::dce(sub);
        }) == 1);
  CHECK(calls == 1);
  const auto& first = g.eqns[0].params.get<std::shared_ptr<const ir::Graph>>("body");
  CHECK(first == g.eqns[1].params.get<std::shared_ptr<const ir::Graph>>("body"));
  CHECK(first != shared);
  CHECK(first->eqns.size() == 1);   // the dead exp went
  CHECK(shared->eqns.size() == 2);  // the original is untouched
}

TEST_CASE("overlap_collectives: a collective becomes start and done, the done as late as it can") {
  REQUIRE(toy_async_registered);
  CHECK(ir::effects_of(toy_start_p).async_half);
  CHECK(ir::effects_of(toy_done_p).collective);
  ir::Graph g = make_graph(
      [](std::span<const Array> v) {
        const Array in[] = {v[0] * 2.0};
        const Array exchanged = ir::bind1(toy_sync_p, in);
        const Array independent = exp(v[1]);  // runs while the exchange is in flight
        return std::vector<Array>{exchanged + independent};
      },
      kTwoF32);
  int split = 0;
  check_same_results(g, [&](ir::Graph& graph) { split = ir::overlap_collectives(graph); });
  CHECK(split == 1);
  CAPTURE(g.str());
  std::vector<const ir::Primitive*> order;
  for (const ir::Eqn& e : g.eqns)
    order.push_back(e.prim);
  CHECK(order == std::vector<const ir::Primitive*>{&lax::mul_p, &toy_start_p, &lax::exp_p,
                                                   &toy_done_p, &lax::add_p});
}
