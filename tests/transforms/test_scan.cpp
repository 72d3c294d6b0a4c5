// scan: values against the loop written out, a graph that does not grow with the length,
// gradients (float64 finite differences, and equal to the unrolled loop's under every
// checkpoint policy of the body), the residuals each policy keeps, nesting, and bad input.
#include <doctest/doctest.h>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/scan.hpp"
#include "harness/close.hpp"
#include "harness/finite_diff.hpp"

using namespace flaxpp;
using testing::check_close;
namespace cp = flaxpp::checkpoint_policies;

namespace {

Array row(const Array& x, std::int64_t t) {
  return lax::take(x, Array::scalar(static_cast<std::int32_t>(t)));
}

// A layer: h -> tanh(h @ w + b), the carry h [B, D]; w [D, D] and b [D] are one layer's rows.
Array layer(const Array& h, const Array& w, const Array& b) {
  return tanh(matmul(h, w) + b);
}

// loss(h0, ws, bs, scale) = sum(scale * h_L ** 2) + sum of every layer's mean activation (a ys
// output), scanning the layers (optionally checkpointed with `policy`) or unrolled.
ArrayFn stack_loss(bool unrolled, PolicyPtr policy = nullptr, bool remat = false) {
  return [=](std::span<const Array> a) {
    const Array &h0 = a[0], &ws = a[1], &bs = a[2], &scale = a[3];
    const std::int64_t L = ws.shape()[0];
    ArrayFn body = [&](std::span<const Array> in) {
      return std::vector<Array>{layer(in[0], in[1], in[2])};
    };
    if (remat) body = checkpoint(body, policy);
    Array h = h0, extra = Array::scalar(0.0);
    if (unrolled) {
      for (std::int64_t t = 0; t < L; ++t) {
        h = body(std::vector<Array>{h, row(ws, t), row(bs, t)})[0];
        extra = extra + mean(h);
      }
    } else {
      const Array xs[] = {ws, bs};
      const ScanResult r = scan(
          [&](std::span<const Array> c, std::span<const Array> x) {
            const Array next = body(std::vector<Array>{c[0], x[0], x[1]})[0];
            return ScanResult{{next}, {mean(next)}};
          },
          std::span<const Array>(&h, 1), xs);
      h = r.carry[0];
      extra = sum(r.ys[0]);
    }
    return std::vector<Array>{sum(scale * h * h) + extra};
  };
}

std::vector<Array> stack_inputs(std::int64_t L, std::int64_t B, std::int64_t D) {
  return {testing::random_f64(Shape{B, D}, 1), testing::random_f64(Shape{L, D, D}, 2, -0.6, 0.6),
          testing::random_f64(Shape{L, D}, 3, -0.2, 0.2), Array::scalar(0.7)};
}

}  // namespace

TEST_CASE("scan: the loop's carry and stacked ys, forward and reverse") {
  // carry = carry + x; ys = carry * 10, over x = 1..4.
  const Array xs = Array::from_vector(std::vector<float>{1, 2, 3, 4}, Shape{4});
  const Array init = Array::scalar(0.0f);
  const ScanBody body = [](std::span<const Array> c, std::span<const Array> x) {
    const Array next = c[0] + x[0];
    return ScanResult{{next}, {next * Array::scalar(10.0f)}};
  };
  const ScanResult f = scan(body, std::span<const Array>(&init, 1), std::span<const Array>(&xs, 1));
  CHECK(f.carry[0].item<float>() == 10.0f);
  CHECK(f.ys[0].to_vector<float>() == std::vector<float>{10, 30, 60, 100});
  const ScanResult r =
      scan(body, std::span<const Array>(&init, 1), std::span<const Array>(&xs, 1), 4, true);
  CHECK(r.ys[0].to_vector<float>() == std::vector<float>{100, 90, 70, 40});
  // Without xs, length iterations; an integer carry passes through.
  const Array n = Array::scalar(std::int32_t{0});
  const ScanResult count = scan(
      [](std::span<const Array> c, std::span<const Array>) {
        return ScanResult{{c[0] + Array::scalar(std::int32_t{2})}, {}};
      },
      std::span<const Array>(&n, 1), {}, 5);
  CHECK(count.carry[0].item<std::int32_t>() == 10);
  // Zero iterations: the initial carry, and ys with no rows.
  const Array none = Array::full(Shape{0}, 0.0, DType::f32);
  const ScanResult empty =
      scan(body, std::span<const Array>(&init, 1), std::span<const Array>(&none, 1));
  CHECK(empty.carry[0].item<float>() == 0.0f);
  CHECK(empty.ys[0].shape() == Shape{0});
}

TEST_CASE("scan: the same values as the loop written out; one body in the graph at any length") {
  for (std::int64_t L : {1, 3, 7}) {
    CAPTURE(L);
    const auto args = stack_inputs(L, 2, 3);
    check_close(stack_loss(false)(args), stack_loss(true)(args));
    std::vector<AVal> avals;
    for (const Array& a : args)
      avals.push_back(a.aval());
    const ir::Graph g = make_graph(stack_loss(false), avals);
    CHECK(ir::count_eqns(g, scan_p) == 1);
    CHECK(ir::count_eqns(g, lax::dot_general_p) == 1);  // the body's one product, at any L
  }
}

TEST_CASE("scan: gradients match float64 finite differences, forward and reverse") {
  testing::check_grad(stack_loss(false), stack_inputs(3, 2, 3));
  const ArrayFn reversed = [](std::span<const Array> a) {
    const ScanResult r = scan(
        [](std::span<const Array> c, std::span<const Array> x) {
          const Array next = tanh(c[0] * x[0]) + c[1];
          return ScanResult{{next, c[1] * x[0]}, {next * c[0]}};
        },
        a.subspan(0, 2), a.subspan(2), std::nullopt, true);
    return std::vector<Array>{r.carry[0], r.ys[0]};
  };
  testing::check_grad(reversed, {testing::random_f64(Shape{4}, 5), testing::random_f64(Shape{4}, 6),
                                 testing::random_f64(Shape{5, 4}, 7)});
}

TEST_CASE("scan(checkpoint(layer)): gradients equal the unrolled stack's under every policy") {
  const auto args = stack_inputs(4, 3, 5);
  const std::vector<Array> one{Array::scalar(1.0)};
  const auto want = vjp(stack_loss(true), args).backward(one);
  check_close(vjp(stack_loss(false), args).backward(one), want);
  for (const PolicyPtr& p : {cp::everything_saveable(), cp::nothing_saveable(), cp::dots_saveable(),
                             cp::dots_with_no_batch_dims_saveable()}) {
    CAPTURE(p->str());
    check_close(vjp(stack_loss(false, p, true), args).backward(one), want);
    check_close(vjp(stack_loss(true, p, true), args).backward(one), want);
  }
}

TEST_CASE("scan: what the forward pass keeps for the backward pass, per policy of the body") {
  // Carry [B, D]; the residual bytes one more layer adds. The backward reads each layer's
  // weights and biases from the stacked operands themselves (one row per layer).
  const std::int64_t B = 8, D = 4;
  const std::int64_t carry = B * D * 8, row = (D * D + D) * 8;
  auto per_layer = [&](bool unrolled, PolicyPtr policy, bool remat) {
    const ArrayFn f = stack_loss(unrolled, policy, remat);
    return (vjp(f, stack_inputs(6, B, D)).residual_bytes -
            vjp(f, stack_inputs(3, B, D)).residual_bytes) /
           3;
  };
  // nothing_saveable: the carry that enters each layer, as JAX's scan(remat(layer)) keeps.
  CHECK(per_layer(false, cp::nothing_saveable(), true) == carry + row);
  // dots_saveable also keeps each layer's product.
  CHECK(per_layer(false, cp::dots_saveable(), true) == 2 * carry + row);
  // Without checkpoint: the layer's input, and tanh's output and 1 - output (JAX's rule reads
  // both), as JAX's scan stacks them; the unrolled loop shares one layer's output with the
  // next layer's input. The bias is not read.
  CHECK(per_layer(false, nullptr, false) == 3 * carry + D * D * 8);
  CHECK(per_layer(true, nullptr, false) == 2 * carry + D * D * 8);
  // Scanned or unrolled, the same residuals.
  CHECK(per_layer(true, cp::nothing_saveable(), true) == carry + row);
  CHECK(per_layer(true, cp::dots_saveable(), true) == 2 * carry + row);
}

TEST_CASE("scan: nested scans and a scan inside a checkpoint region differentiate") {
  const ArrayFn nested = [](std::span<const Array> a) {
    const ScanResult outer = scan(
        [](std::span<const Array> c, std::span<const Array> x) {
          const ScanResult inner = scan(
              [](std::span<const Array> ci, std::span<const Array> xi) {
                return ScanResult{{tanh(ci[0] * xi[0]) + ci[0]}, {}};
              },
              c, x);
          return ScanResult{{inner.carry[0] * Array::scalar(0.9)}, {inner.carry[0]}};
        },
        a.subspan(0, 1), a.subspan(1));
    return std::vector<Array>{outer.carry[0], outer.ys[0]};
  };
  const std::vector<Array> args{testing::random_f64(Shape{3}, 8),
                                testing::random_f64(Shape{4, 2, 3}, 9)};
  testing::check_grad(nested, args);
  testing::check_grad(checkpoint(nested, cp::nothing_saveable()), args);
  testing::check_grad(checkpoint(nested, cp::everything_saveable()), args);
}

TEST_CASE("scan: bad input is a clear error") {
  const Array init = Array::scalar(0.0f);
  const std::span<const Array> carry(&init, 1);
  const Array a = Array::full(Shape{3, 2}, 1.0, DType::f32),
              b = Array::full(Shape{4}, 1.0, DType::f32);
  const ScanBody keep = [](std::span<const Array> c, std::span<const Array>) {
    return ScanResult{{c[0]}, {}};
  };
  const Array ab[] = {a, b};
  CHECK_THROWS_WITH_AS(scan(keep, carry, ab), doctest::Contains("xs[1] has a leading axis of 4"),
                       ValueError);
  CHECK_THROWS_WITH_AS(scan(keep, carry, {}), doctest::Contains("pass length"), ValueError);
  CHECK_THROWS_WITH_AS(scan(keep, carry, std::span<const Array>(&a, 1), 5),
                       doctest::Contains("expected 5"), ValueError);
  const ScanBody grows = [](std::span<const Array>, std::span<const Array> x) {
    return ScanResult{{x[0]}, {}};
  };
  CHECK_THROWS_WITH_AS(
      scan(grows, carry, std::span<const Array>(&a, 1)),
      doctest::Contains("must keep the shape and dtype of the initial carry, f32[]"), ValueError);
}

TEST_CASE("scan under jit: a train step over scanned layers, traced once, equal to eager") {
  // value_and_grad of the scanned stack and an SGD update, jitted with the weights donated:
  // the same loss and new weights as the eager step, and one trace for two calls.
  const auto args = stack_inputs(3, 2, 3);
  const ArrayFn loss = stack_loss(false, cp::nothing_saveable(), true);
  auto sgd = [&](std::span<const Tree> a) {
    const std::vector<Array> in{args[0], a[0].array(), args[2], args[3]};
    const std::vector<Array> ct{Array::scalar(1.0)};
    const VjpResult r = vjp(loss, in);
    const Array g = r.backward(ct)[1];
    return std::vector<Tree>{Tree(a[0].array() - 0.1 * g), Tree(r.outputs[0])};
  };
  const std::vector<Tree> want = sgd(std::vector<Tree>{Tree(args[1])});
  const Jitted step = jit(sgd, {.donate_argnums = {0}});
  for (int call = 0; call < 2; ++call) {
    const std::vector<Tree> got = step({Tree(args[1] + 0.0)});
    CHECK(got[0].array().to_vector<double>() == want[0].array().to_vector<double>());
    CHECK(got[1].array().item<double>() == want[1].array().item<double>());
  }
  CHECK(step.num_traces() == 1);
}

TEST_CASE("scan: rows read in place are never written, eagerly and under jit") {
  // Rows of 64 float32 (256 bytes) are views of the xs' buffer. The body's elementwise work
  // could write its result into a row nothing else holds; a view never is such a row, so the
  // xs keep their values, whether the caller holds them or the scan reads them last.
  std::vector<float> values(5 * 64);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = 0.25f * static_cast<float>(i % 37) - 3.0f;
  const Array xs = Array::from_vector(values, Shape{5, 64});
  const auto body = [](std::span<const Array> c, std::span<const Array> x) {
    const Array y = x[0] * 2.0f + 1.0f;
    return ScanResult{{c[0] + y}, {y}};
  };
  const auto run = [&](const Array& rows) {
    const ScanResult r = scan(body, std::vector<Array>{Array::full(Shape{64}, 0.0, DType::f32)},
                              std::vector<Array>{rows});
    return std::vector<Tree>{Tree(r.carry[0]), Tree(r.ys[0])};
  };
  std::vector<float> want_ys(values.size()), want_carry(64, 0.0f);
  for (std::size_t i = 0; i < values.size(); ++i) {
    want_ys[i] = values[i] * 2.0f + 1.0f;
    want_carry[i % 64] += want_ys[i];
  }
  const auto check = [&](const std::vector<Tree>& got) {
    CHECK(got[0].array().to_vector<float>() == want_carry);
    CHECK(got[1].array().to_vector<float>() == want_ys);
  };
  check(run(xs));
  const Jitted held = jit([&](std::span<const Tree> a) { return run(a[0].array()); });
  check(held({Tree(xs)}));
  // The jitted body's program may write into an operand its reader gives up: what the views
  // must be kept from.
  int donating = 0;
  const CompiledStep lowered = held.lower(std::vector<Tree>{Tree(xs)});
  for (const ir::Eqn& e : lowered.graph().eqns)
    ir::for_each_subgraph(e, [&](const std::string&, const ir::Graph& g) {
      for (const ir::Eqn& b : g.eqns)
        donating += b.prim == &lax::fused_elementwise_p && b.params.has("donate") &&
                    b.params.get<bool>("donate");
    });
  CHECK(donating > 0);
  // The xs made inside the step (x * 1) and read last by the scan: nothing else holds them,
  // and their rows are views all the same.
  const Jitted made = jit([&](std::span<const Tree> a) { return run(a[0].array() * 1.0f); });
  check(made({Tree(xs)}));
  CHECK(xs.to_vector<float>() == values);
}

TEST_CASE("scan under jit: the loop bodies get the step's passes, with the eager step's bits") {
  // The same step: each body (the forward loop's, the backward loop's with its checkpoint
  // recomputation) is simplified and fused as the step itself is, and gives the same bits as
  // the step without fusion.
  const auto args = stack_inputs(3, 2, 3);
  const ArrayFn loss = stack_loss(false, cp::nothing_saveable(), true);
  auto sgd = [&](std::span<const Tree> a) {
    const std::vector<Array> in{args[0], a[0].array(), args[2], args[3]};
    const VjpResult r = vjp(loss, in);
    const Array g = r.backward(std::vector<Array>{Array::scalar(1.0)})[1];
    return std::vector<Tree>{Tree(a[0].array() - 0.1 * g), Tree(r.outputs[0])};
  };
  const Jitted fused = jit(sgd), plain = jit(sgd, {.donate_argnums = {},
                                                   .fuse_elementwise = false,
                                                   .fuse_dot_bias = true,
                                                   .overlap_collectives = true});
  const std::vector<Tree> in{Tree(args[1])};
  const CompiledStep step = fused.lower(in);
  CAPTURE(step.graph().str());
  int bodies = 0, fused_bodies = 0;
  for (const ir::Eqn& e : step.graph().eqns)
    ir::for_each_subgraph(e, [&](const std::string&, const ir::Graph& body) {
      ++bodies;
      CHECK(ir::count_eqns(body, checkpoint_p) == 0);
      CHECK(ir::count_eqns(body, lax::dot_general_bias_p) == 1);
      fused_bodies += ir::count_eqns(body, lax::fused_elementwise_p) > 0;
    });
  CHECK(bodies == 2);        // the forward loop and the backward one
  // The forward one: tanh and its sum (a row reduction); the backward one: tanh's
  // recomputation and its derivative.
  CHECK(fused_bodies == 2);
  CHECK(ir::op_counts(step.graph()).executed < ir::op_counts(plain.lower(in).graph()).executed);
  const std::vector<Tree> a = fused(in), b = plain(in);
  CHECK(a[0].array().to_vector<double>() == b[0].array().to_vector<double>());
  CHECK(a[1].array().item<double>() == b[1].array().item<double>());
}
