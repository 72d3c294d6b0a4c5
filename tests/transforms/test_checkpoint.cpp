// checkpoint / remat: values, gradients under every policy, saved residuals as JAX reports
// them, recomputation counts and peak memory per policy.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include "flaxpp/io/refs.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/trace.hpp"
#include "harness/finite_diff.hpp"

using namespace flaxpp;
namespace cp = flaxpp::checkpoint_policies;

namespace {

// refs-format's f(w1, w2, x) = sum((relu(x @ w1) @ w2) ** 2), and g, the same with
// checkpoint_name on x@w1 ("a"), relu ("b") and the second dot ("c").
constexpr auto f = refs::dot_policy_f;
constexpr auto g = refs::named_dot_policy_g;

std::vector<Array> inputs(std::int64_t n, std::int64_t d, DType dtype = DType::f32) {
  std::vector<Array> out;
  unsigned seed = 100;
  for (const Shape& s : {Shape{d, d}, Shape{d, d}, Shape{n, d}}) {
    Array a = testing::random_f64(s, seed++);
    out.push_back(dtype == DType::f64 ? a : astype(a, dtype));
  }
  return out;
}

std::vector<std::string> residual_lines(const ArrayFn& fn, std::span<const Array> args) {
  const std::string names[] = {"w1", "w2", "x"};
  std::vector<std::string> lines;
  for (const SavedResidual& r : saved_residuals(fn, args))
    lines.push_back(r.str(names));
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::vector<PolicyPtr> all_policies() {
  return {cp::everything_saveable(),
          cp::nothing_saveable(),
          cp::dots_saveable(),
          cp::dots_with_no_batch_dims_saveable(),
          cp::save_only_these_names({"a", "c"}),
          cp::save_any_names_but_these({"b"}),
          cp::save_anything_except_these_names({"a"}),
          cp::save_and_offload_only_these_names({"a"}, {"c"}),
          cp::offload_dot_with_no_batch_dims(),
          cp::save_from_both_policies(cp::dots_saveable(), cp::save_only_these_names({"b"}))};
}

}  // namespace

TEST_CASE("checkpoint: evaluating a checkpointed function gives the function's values") {
  const auto args = inputs(5, 4);
  const Array want = f(args)[0];
  for (const PolicyPtr& p : all_policies()) {
    CAPTURE(p->str());
    CHECK(checkpoint(f, p)(args)[0].to_vector<float>() == want.to_vector<float>());
  }
}

TEST_CASE("checkpoint: gradients are the same under every policy and without checkpoint") {
  const auto args = inputs(7, 6, DType::f64);
  const std::vector<Array> ct{Array::scalar(1.0)};
  const auto want = vjp(f, args).backward(ct);
  for (const ArrayFn& fn : {ArrayFn(f), ArrayFn(g)}) {
    for (const PolicyPtr& p : all_policies()) {
      CAPTURE(p->str());
      const auto got = vjp(checkpoint(fn, p), args).backward(ct);
      for (std::size_t i = 0; i < 3; ++i) {
        const auto a = got[i].to_vector<double>(), b = want[i].to_vector<double>();
        for (std::size_t k = 0; k < a.size(); ++k)
          CHECK(a[k] == doctest::Approx(b[k]).epsilon(1e-12));
      }
    }
  }
  testing::check_grad(checkpoint(f, cp::dots_saveable()), args);
}

TEST_CASE("checkpoint: a region reading one value twice (tied weights) differentiates") {
  // The backward pass runs the region's graph inline; the value it reads twice must reach both
  // of its inputs.
  const ArrayFn product = [](std::span<const Array> a) {
    return std::vector<Array>{sum(a[0] * a[1])};
  };
  const ArrayFn tied = [&](std::span<const Array> a) {
    const std::vector<Array> twice{a[0], a[0]};
    return checkpoint(product, cp::nothing_saveable())(twice);
  };
  const Array v = Array::from_vector(std::vector<double>{1.0, -2.0, 3.0}, Shape{3});
  const std::vector<Array> ct{Array::scalar(1.0)};
  const auto cts = vjp(tied, std::span<const Array>(&v, 1)).backward_once(ct);
  CHECK(cts.at(0).to_vector<double>() == std::vector<double>{2.0, -4.0, 6.0});
}

TEST_CASE("vjp: a wrong cotangent is an error that keeps the backward pass usable") {
  const auto args = inputs(3, 2, DType::f64);
  const VjpResult r = vjp(f, args);
  const std::vector<Array> wrong{Array::scalar(1.0f)};
  CHECK_THROWS_WITH_AS(r.backward_once(wrong), doctest::Contains("cotangent 0 must be"),
                       ValueError);
  const std::vector<Array> ct{Array::scalar(1.0)};
  CHECK(r.backward_once(ct).size() == 3);
}

TEST_CASE("saved_residuals: the lines JAX prints for f and g (jax 0.10.2, N=5, d=4)") {
  const auto args = inputs(5, 4);
  using Lines = std::vector<std::string>;
  const Lines args_only{"f32[4,4] from the argument w1", "f32[4,4] from the argument w2",
                        "f32[5,4] from the argument x"};
  CHECK(residual_lines(checkpoint(f, cp::nothing_saveable()), args) == args_only);
  Lines dots = args_only;
  dots.insert(dots.end(), {"f32[5,4] output of dot_general", "f32[5,4] output of dot_general"});
  std::sort(dots.begin(), dots.end());
  CHECK(residual_lines(checkpoint(f, cp::dots_saveable()), args) == dots);
  CHECK(residual_lines(checkpoint(f, cp::dots_with_no_batch_dims_saveable()), args) == dots);
  Lines named = args_only;
  named.insert(named.end(), {"f32[5,4] named 'a'", "f32[5,4] named 'c'"});
  std::sort(named.begin(), named.end());
  CHECK(residual_lines(checkpoint(g, cp::save_only_these_names({"a", "c"})), args) == named);
}

TEST_CASE("saved_residuals: offloaded residuals live in host memory") {
  const auto args = inputs(5, 4);
  const auto lines = residual_lines(checkpoint(f, cp::offload_dot_with_no_batch_dims()), args);
  CHECK(std::count(lines.begin(), lines.end(), "f32<host>[5,4] output of device_put") == 2);
}

TEST_CASE(
    "checkpoint: a checkpointed batched dot is not saved by dots_with_no_batch_dims_saveable") {
  const Array a = testing::random_f64(Shape{2, 3, 4}, 1),
              b = testing::random_f64(Shape{2, 4, 5}, 2);
  auto fn = [](std::span<const Array> v) {
    return std::vector<Array>{sum(square(matmul(v[0], v[1])))};
  };
  const std::vector<Array> args{a, b};
  const auto batch_free =
      saved_residuals(checkpoint(fn, cp::dots_with_no_batch_dims_saveable()), args);
  const auto any_dot = saved_residuals(checkpoint(fn, cp::dots_saveable()), args);
  CHECK(batch_free.size() == 2);  // the two arguments
  CHECK(any_dot.size() == 3);     // and the dot output
}

TEST_CASE(
    "checkpoint: constant computations inside the region are recomputed under nothing_saveable") {
  const Array x = testing::random_f64(Shape{4}, 3);
  const Array c = testing::random_f64(Shape{4}, 4);
  auto fn = [&](std::span<const Array> v) { return std::vector<Array>{sum(v[0] * exp(c))}; };
  const auto saved =
      saved_residuals(checkpoint(fn, cp::nothing_saveable()), std::span<const Array>(&x, 1));
  // As JAX (checked with jax 0.10.2): exp(c) is recomputed from c, which is the one residual,
  // "f64[4] from a constant"; x itself is not needed by the backward pass.
  REQUIRE(saved.size() == 1);
  CHECK(saved[0].str() == "f64[4] from a constant");
}

TEST_CASE("checkpoint: an output that is an input, or repeated, does not double its gradient") {
  // JAX: d/dx sum(o0*2 + x*3 + o1) with (o0, o1) = (x, tanh(x)) is 5 + tanh'(x).
  const Array x = Array::from_vector(std::vector<double>{0.5, 1.0}, Shape{2});
  const ArrayFn region = checkpoint([](std::span<const Array> v) {
    return std::vector<Array>{v[0], tanh(v[0])};
  });
  const Array dv = grad([&](const Array& v) {
    const auto o = region(std::span<const Array>(&v, 1));
    return sum(o[0] * 2.0 + v * 3.0 + o[1]);
  })(x);
  const std::vector<double> want{5.786448, 5.419974};
  for (std::size_t i = 0; i < 2; ++i)
    CHECK(dv.to_vector<double>()[i] == doctest::Approx(want[i]).epsilon(1e-6));
  const ArrayFn twice = checkpoint([](std::span<const Array> v) {
    const Array y = tanh(v[0]);
    return std::vector<Array>{y, y};
  });
  const Array g2 = grad([&](const Array& v) {
    const auto o = twice(std::span<const Array>(&v, 1));
    return sum(o[0] * 2.0 + o[1] * 3.0);
  })(x);
  const std::vector<double> want2{3.932238, 2.099871};  // 5 * tanh'(x)
  for (std::size_t i = 0; i < 2; ++i)
    CHECK(g2.to_vector<double>()[i] == doctest::Approx(want2[i]).epsilon(1e-6));
}

TEST_CASE(
    "checkpoint: a region input computed from constants only gets no cotangent (no extra dots)") {
  const Array x = testing::random_f64(Shape{3, 4}, 8), w = testing::random_f64(Shape{4, 4}, 9);
  const ArrayFn region = checkpoint(
      [](std::span<const Array> v) { return std::vector<Array>{sum(tanh(matmul(v[0], v[1])))}; },
      cp::dots_saveable());
  const VjpResult r = vjp(
      [&](std::span<const Array> v) {
        return region(std::vector<Array>{x * 2.0, v[0]});
      },
      std::span<const Array>(&w, 1));
  // One dot for the weight's cotangent; the constant input's cotangent is not computed.
  CHECK(ir::count_eqns(*r.backward_graph, lax::dot_general_p) == 1);
}

TEST_CASE("checkpoint: static_argnums pass concrete values the function may read") {
  const Array x = testing::random_f64(Shape{3}, 5);
  const Array flag = Array::scalar(2.0);
  auto fn = [](std::span<const Array> v) {
    const double k = v[1].to_vector<double>()[0];  // reading values is allowed for static args
    return std::vector<Array>{sum(v[0] * k)};
  };
  const std::vector<Array> args{x, flag};
  const VjpResult r = vjp(
      [&](std::span<const Array> v) {
        return checkpoint(fn, nullptr, {1})(std::vector{v[0], flag});
      },
      std::span<const Array>(&x, 1));
  const std::vector<Array> ct{Array::scalar(1.0)};
  CHECK(r.backward(ct)[0].to_vector<double>() == std::vector<double>(3, 2.0));
  CHECK_THROWS_WITH_AS(checkpoint(fn, nullptr, {2})(args),
                       doctest::Contains("static_argnums contains 2"), ValueError);
}

TEST_CASE("checkpoint_policies::none(): no checkpoint, as a policy value beside the others") {
  const auto args = inputs(5, 4);
  CHECK(cp::is_none(cp::from_name("none")));
  CHECK(cp::none()->str() == "none");
  CHECK_FALSE(cp::is_none(nullptr));  // a null policy is nothing_saveable
  CHECK_FALSE(cp::is_none(cp::everything_saveable()));
  // One loop over "no remat" and the policies, no second type: checkpoint(f, none()) is f.
  std::vector<AVal> avals;
  for (const Array& a : args)
    avals.push_back(a.aval());
  for (const PolicyPtr& policy : {cp::none(), cp::nothing_saveable()}) {
    CAPTURE(policy->str());
    const ir::Graph graph = make_graph(checkpoint(f, policy), avals);
    CHECK(ir::count_eqns(graph, checkpoint_p) == (cp::is_none(policy) ? 0 : 1));
  }
  // What f's plain VJP keeps.
  CHECK(residual_lines(checkpoint(f, cp::none()), args) == residual_lines(f, args));
  CHECK_THROWS_WITH_AS(cp::save_from_both_policies(cp::none(), cp::dots_saveable()),
                       doctest::Contains("none() is no policy"), ValueError);
}

TEST_CASE("checkpoint policies: misuse is a clear error") {
  CHECK_THROWS_WITH_AS(cp::from_name("dots_savable"),
                       doctest::Contains("unknown checkpoint policy"), ValueError);
  CHECK_THROWS_WITH_AS(cp::save_and_offload_only_these_names({"a"}, {"a"}),
                       doctest::Contains("disjoint"), ValueError);
  CHECK_THROWS_WITH_AS(
      cp::offload_dot_with_no_batch_dims(MemoryKind::pinned_host, MemoryKind::pinned_host),
      doctest::Contains("both \"pinned_host\""), ValueError);
  CHECK_THROWS_AS(memory_kind_from_name("unpinned_host"), ValueError);
  const auto args = inputs(3, 2);
  const PolicyPtr nonsense = cp::custom("nonsense", [](auto&&...) {
    return ir::Decision::offload(MemoryKind::device, MemoryKind::device);
  });
  CHECK_THROWS_WITH_AS(vjp(checkpoint(f, nonsense), args), doctest::Contains("invalid decision"),
                       ValueError);
  const PolicyPtr both =
      cp::save_from_both_policies(cp::offload_dot_with_no_batch_dims(), cp::nothing_saveable());
  CHECK_THROWS_WITH_AS(vjp(checkpoint(f, both), args),
                       doctest::Contains("must answer save or recompute"), ValueError);
}

TEST_CASE("checkpoint: a custom policy sees the primitive, input avals and params") {
  const auto args = inputs(5, 4);
  std::vector<std::string> asked;
  const PolicyPtr spy =
      cp::custom("spy", [&](const ir::Primitive& p, std::span<const AVal> in, const ir::Params&) {
        asked.push_back(p.name() + ":" + std::to_string(in.size()));
        return ir::Decision::recompute();
      });
  (void)saved_residuals(checkpoint(f, spy), args);
  CHECK(std::count(asked.begin(), asked.end(), "dot_general:2") == 2);
}

TEST_CASE("checkpoint: nested checkpoints follow JAX's outer-policy rule") {
  // The inner region would save the dots; the outer nothing_saveable decides what crosses.
  const auto args = inputs(5, 4);
  const ArrayFn inner = checkpoint(f, cp::dots_saveable());
  const auto nested = saved_residuals(checkpoint(inner, cp::nothing_saveable()), args);
  for (const SavedResidual& r : nested)
    CHECK(r.kind == SavedResidual::Kind::argument);
  CHECK(nested.size() == 3);
  // And the other way round: the outer dots policy saves dots inside an inner nothing_saveable.
  const auto outer_dots =
      saved_residuals(checkpoint(checkpoint(f, cp::nothing_saveable()), cp::dots_saveable()), args);
  CHECK(outer_dots.size() == 5);
}

TEST_CASE(
    "checkpoint: offloaded residuals sit in the pinned_host pool between forward and backward") {
  const auto args = inputs(64, 32);
  Backend& dev = backend(default_device());
  const std::int64_t host0 = dev.memory_stats(MemoryKind::pinned_host).live_bytes;
  {
    const VjpResult r = vjp(checkpoint(f, cp::offload_dot_with_no_batch_dims()), args);
    // Both dot outputs, f32[64,32] each, were copied to host memory.
    CHECK(dev.memory_stats(MemoryKind::pinned_host).live_bytes - host0 == 2 * 64 * 32 * 4);
    const std::vector<Array> ct{Array::scalar(1.0f)};
    (void)r.backward(ct);
  }
  CHECK(dev.memory_stats(MemoryKind::pinned_host).live_bytes == host0);
}

TEST_CASE("checkpoint, typed: a function of Arrays gives the span form's values and gradients") {
  const Array x = astype(testing::random_f64(Shape{5, 3}, 1, -1.0, 1.0), DType::f32);
  const Array w = astype(testing::random_f64(Shape{3, 4}, 2, -1.0, 1.0), DType::f32);
  const auto typed = checkpoint(
      [](const Array& in, const Array& k) { return tanh(matmul(in, k)); }, cp::dots_saveable());
  const ArrayFn spanned = checkpoint(
      [](std::span<const Array> a) { return std::vector{tanh(matmul(a[0], a[1]))}; },
      cp::dots_saveable());
  CHECK(typed(x, w).to_vector<float>() == spanned(std::vector{x, w})[0].to_vector<float>());
  const Array g_typed = grad([&](const Array& k) { return sum(typed(x, k)); })(w);
  const Array g_span = grad([&](const Array& k) { return sum(spanned(std::vector{x, k})[0]); })(w);
  CHECK(g_typed.to_vector<float>() == g_span.to_vector<float>());
  // Several results: a vector, in order; remat is the same transform.
  const auto two = remat([](const Array& a, const Array& b) { return std::vector{a + b, a * b}; });
  const std::vector<Array> out = two(x, x);
  REQUIRE(out.size() == 2);
  CHECK(out[1].to_vector<float>() == (x * x).to_vector<float>());
}
