// Reverse-mode AD: every differentiable primitive and op against float64 finite differences,
// and the vjp / value_and_grad API over arrays and trees.
#include <doctest/doctest.h>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/custom_vjp.hpp"
#include "harness/finite_diff.hpp"

using namespace flaxpp;
using testing::check_grad;
using testing::random_f64;

namespace {
ArrayFn unary(Array (*op)(const Array&)) {
  return [op](std::span<const Array> x) { return std::vector<Array>{op(x[0])}; };
}
ArrayFn binary(Array (*op)(const Array&, const Array&)) {
  return [op](std::span<const Array> x) { return std::vector<Array>{op(x[0], x[1])}; };
}
}  // namespace

TEST_CASE("vjp: elementwise binary primitives agree with finite differences (float64)") {
  const Array x = random_f64(Shape{3, 4}, 1), y = random_f64(Shape{3, 4}, 2, 0.5, 2.0);
  for (auto op : {lax::add, lax::sub, lax::mul, lax::div, lax::max, lax::min})
    check_grad(binary(op), {x, y});
  // A 0-d operand broadcasts; its cotangent is summed.
  check_grad(binary(lax::mul), {x, random_f64(Shape{}, 3)});
  check_grad(binary(lax::add), {random_f64(Shape{}, 4), y});
  // pow: both operands, the base positive.
  check_grad(binary(lax::pow), {random_f64(Shape{3, 4}, 8, 0.2, 3.0), x});
}

TEST_CASE("vjp: elementwise unary primitives agree with finite differences (float64)") {
  const Array x = random_f64(Shape{5}, 5);
  const Array positive = random_f64(Shape{5}, 6, 0.2, 3.0);
  for (auto op : {lax::neg, lax::exp, lax::tanh, lax::logistic, lax::erf, lax::abs, lax::cos,
                  lax::sin})
    check_grad(unary(op), {x});
  for (auto op : {lax::log, lax::log1p, lax::sqrt, lax::rsqrt})
    check_grad(unary(op), {positive});
  for (std::int64_t y : {2, 3, -2, 1}) {
    check_grad(
        [y](std::span<const Array> v) { return std::vector<Array>{lax::integer_pow(v[0], y)}; },
        {positive});
  }
}

TEST_CASE("vjp: structural primitives agree with finite differences (float64)") {
  const Array x = random_f64(Shape{2, 3, 4}, 7);
  check_grad(
      [](std::span<const Array> v) {
        return std::vector<Array>{lax::reduce_sum(v[0], {0, 2})};
      },
      {x});
  check_grad(
      [](std::span<const Array> v) { return std::vector<Array>{lax::reduce_max(v[0], {1})}; }, {x});
  check_grad(
      [](std::span<const Array> v) {
        return std::vector<Array>{lax::transpose(v[0], {2, 0, 1})};
      },
      {x});
  check_grad(
      [](std::span<const Array> v) {
        return std::vector<Array>{lax::reshape(v[0], Shape{6, 4})};
      },
      {x});
  check_grad(
      [](std::span<const Array> v) {
        return std::vector<Array>{lax::broadcast_in_dim(v[0], Shape{2, 5, 3, 4}, {0, 2, 3})};
      },
      {x});
  check_grad(
      [](std::span<const Array> v) {
        return std::vector<Array>{lax::broadcast_in_dim(v[0], Shape{3, 4}, {0, 1})};
      },
      {random_f64(Shape{1, 4}, 8)});
  check_grad(
      [](std::span<const Array> v) {
        return std::vector<Array>{lax::select(lax::gt(v[0], v[1]), v[0], lax::mul(v[1], v[1]))};
      },
      {random_f64(Shape{6}, 9), random_f64(Shape{6}, 10)});
}

TEST_CASE("vjp: dot_general agrees with finite differences for every dimension-number case") {
  struct Case {
    Shape lhs, rhs;
    ir::DotDimensionNumbers dims;
  };
  const Case cases[] = {
      {Shape{3, 4}, Shape{4, 5}, {{1}, {0}, {}, {}}},              // matmul
      {Shape{4, 3}, Shape{4, 5}, {{0}, {0}, {}, {}}},              // contract dim 0 of both
      {Shape{3, 4}, Shape{5, 4}, {{1}, {1}, {}, {}}},              // x @ y.T
      {Shape{2, 3, 4}, Shape{2, 4, 5}, {{2}, {1}, {0}, {0}}},      // batched
      {Shape{3, 2, 4}, Shape{4, 5, 2}, {{2}, {0}, {1}, {2}}},      // batch dims not leading
      {Shape{3}, Shape{4}, {{}, {}, {}, {}}},                      // outer product
      {Shape{2, 3, 4}, Shape{3, 4, 5}, {{1, 2}, {0, 1}, {}, {}}},  // two contracting dims
      {Shape{2, 3, 4},
       Shape{4, 3, 5},
       {{1, 2}, {1, 0}, {}, {}}},  // contracting dims in another order
  };
  unsigned seed = 20;
  for (const Case& c : cases) {
    const ir::DotDimensionNumbers dims = c.dims;
    check_grad(
        [dims](std::span<const Array> v) {
          return std::vector<Array>{lax::dot_general(v[0], v[1], dims)};
        },
        {random_f64(c.lhs, seed++), random_f64(c.rhs, seed++)});
  }
}

TEST_CASE("vjp: the numpy-style ops and activations agree with finite differences") {
  const Array x = random_f64(Shape{3, 4}, 30, -2, 2);
  for (auto op :
       {+[](const Array& a) { return relu(a); }, +[](const Array& a) { return sigmoid(a); },
        +[](const Array& a) { return silu(a); }, +[](const Array& a) { return gelu(a); },
        +[](const Array& a) { return gelu(a, false); }, +[](const Array& a) { return softmax(a); },
        +[](const Array& a) { return log_softmax(a, 0); },
        +[](const Array& a) { return logsumexp(a, Axes{1}); },
        +[](const Array& a) { return mean(square(a), Axes{0}); }})
    check_grad(unary(op), {x});
  check_grad([](std::span<const Array> v) { return std::vector<Array>{matmul(v[0], v[1]) + v[2]}; },
             {random_f64(Shape{2, 3}, 31), random_f64(Shape{3, 4}, 32), random_f64(Shape{4}, 33)});
}

TEST_CASE("vjp: take and scatter_add agree with finite differences, repeated rows included") {
  const Array idx = Array::from_vector(std::vector<std::int32_t>{2, 0, 2, 3, 2, 1}, Shape{2, 3});
  check_grad([&](std::span<const Array> v) { return std::vector<Array>{lax::take(v[0], idx)}; },
             {random_f64(Shape{4, 3}, 50)});
  check_grad(
      [&](std::span<const Array> v) {
        return std::vector<Array>{lax::scatter_add(v[0], idx, v[1])};
      },
      {random_f64(Shape{4, 3}, 51), random_f64(Shape{2, 3, 3}, 52)});
  // Their VJPs are each other, so they differentiate twice: d/dx of <ct, take(x)>'s gradient.
  check_grad(
      [&](std::span<const Array> v) {
        const auto loss = [&](const Array& w) { return sum(square(lax::take(w, idx))); };
        return std::vector<Array>{grad(loss)(v[0])};
      },
      {random_f64(Shape{4, 3}, 53)});
}

TEST_CASE("vjp: the zeros take's gradient is scattered into are made in the backward pass") {
  // Nothing crosses from the forward to the backward pass (the ids are a constant of the
  // function), not a zero table of the table's size (an Embed table of vocab x features).
  const Array idx = Array::from_vector(std::vector<std::int32_t>{2, 0, 2}, Shape{3});
  const ArrayFn f = [&](std::span<const Array> v) {
    return std::vector<Array>{sum(lax::take(v[0], idx))};
  };
  const Array table = random_f64(Shape{1000, 16}, 54);
  CHECK(vjp(f, std::span<const Array>(&table, 1)).residual_bytes == 0);
}

TEST_CASE("vjp: layer_norm agrees with finite differences for x, scale and bias (float64)") {
  const ArrayFn f = [](std::span<const Array> v) {
    return std::vector<Array>{lax::layer_norm(v[0], v[1], v[2], 1e-6)};
  };
  check_grad(f, {random_f64(Shape{2, 3, 7}, 40, -2, 2), random_f64(Shape{7}, 41, 0.5, 1.5),
                 random_f64(Shape{7}, 42)});
  check_grad(f, {random_f64(Shape{5}, 43, -2, 2), random_f64(Shape{5}, 44, 0.5, 1.5),
                 random_f64(Shape{5}, 45)});
  // Once differentiable: its cotangent primitives have no VJP of their own.
  const Array x = random_f64(Shape{2, 3}, 46), s = random_f64(Shape{3}, 47);
  CHECK_THROWS_WITH_AS(vjp(
                           [&](std::span<const Array> v) {
                             return std::vector<Array>{lax::layer_norm_dx(v[0], s, v[0], 1e-6)};
                           },
                           std::vector<Array>{x}),
                       doctest::Contains("layer_norm_dx"), Error);
}

TEST_CASE("relu: gradient is 0 at exactly 0, as jax.nn.relu's custom JVP says") {
  const Array x = Array::from_vector(std::vector<double>{-1.0, 0.0, 2.0}, Shape{3});
  const Array g = grad([](const Array& v) { return sum(relu(v)); })(x);
  CHECK(g.to_vector<double>() == std::vector<double>{0.0, 0.0, 1.0});
}

TEST_CASE("value_and_grad: a tree of parameters gets a tree of gradients with the same paths") {
  const Tree params{{"w", random_f64(Shape{3, 2}, 40)}, {"b", random_f64(Shape{2}, 41)}};
  const Array x = random_f64(Shape{4, 3}, 42);
  auto [loss, g] = value_and_grad([&](const Tree& p) {
    return sum(square(matmul(x, p["w"].array()) + p["b"].array()));
  })(params);
  CHECK(loss.shape() == Shape{});
  CHECK(g.keys() == std::vector<std::string>{"b", "w"});
  CHECK(g["w"].array().shape() == Shape{3, 2});
  // Against finite differences of the same loss.
  check_grad(
      [&](std::span<const Array> v) {
        return std::vector<Array>{sum(square(matmul(x, v[0]) + v[1]))};
      },
      {params["w"].array(), params["b"].array()});
}

TEST_CASE("value_and_grad: argnums selects the differentiated arguments; others are constants") {
  const Tree args[] = {Tree(random_f64(Shape{3}, 50)), Tree(random_f64(Shape{3}, 51))};
  const int argnums[] = {1};
  const ValueAndGrad r = value_and_grad(
      [](std::span<const Tree> a) { return sum(multiply(a[0].array(), a[1].array())); }, args,
      argnums);
  REQUIRE(r.grads.size() == 1);
  CHECK(r.grads[0].array().to_vector<double>() == args[0].array().to_vector<double>());
}

TEST_CASE("vjp: an input the outputs do not depend on gets a zero cotangent") {
  const Array x = random_f64(Shape{2}, 60), y = random_f64(Shape{3}, 61);
  const VjpResult r = vjp([](std::span<const Array> v) { return std::vector<Array>{exp(v[0])}; },
                          std::vector{x, y});
  const Array ct = Array::full(Shape{2}, 1.0, DType::f64);
  const auto cts = r.backward(std::span<const Array>(&ct, 1));
  CHECK(cts[1].to_vector<double>() == std::vector<double>(3, 0.0));
}

TEST_CASE("grad: nested grad differentiates the backward pass (d2/dx2 x^3 = 6x)") {
  const Array x = Array::scalar(2.0);
  auto dfdx = [](const Array& v) { return grad([](const Array& u) { return power(u, 3); })(v); };
  const Array second = grad([&](const Array& v) { return dfdx(v); })(x);
  CHECK(second.to_vector<double>()[0] == doctest::Approx(12.0));
}

TEST_CASE("value_and_grad: a non-scalar loss and an integer argument are clear errors") {
  CHECK_THROWS_WITH_AS(value_and_grad([](const Array& v) { return v; })(random_f64(Shape{3}, 70)),
                       doctest::Contains("must return a scalar (0-d) floating array, got f64[3]"),
                       ValueError);
  CHECK_THROWS_WITH_AS(value_and_grad([](const Array& v) { return sum(astype(v, DType::f64)); })(
                           Array::full(Shape{2}, 1, DType::i32)),
                       doctest::Contains("only floating inputs can be differentiated"), ValueError);
}

TEST_CASE("abs: the gradient at 0 is +1, as JAX's select(x >= 0, g, -g)") {
  const Array x = Array::from_vector(std::vector<double>{0.0, -1.0, 2.0}, Shape{3});
  CHECK(grad([](const Array& v) { return sum(abs(v)); })(x).to_vector<double>() ==
        std::vector<double>{1, -1, 1});
}

TEST_CASE("custom_vjp: a rule returning a cotangent of the wrong shape or count is a clear error") {
  static const CustomVjpRule bad_shape("test.bad_shape", [](const ir::VjpArgs& a) {
    return std::vector<Array>{sum(a.cotangents[0])};
  });
  static const CustomVjpRule bad_count("test.bad_count",
                                       [](const ir::VjpArgs&) { return std::vector<Array>{}; });
  const Array x = random_f64(Shape{3}, 80);
  for (const CustomVjpRule* rule : {&bad_shape, &bad_count}) {
    auto f = [rule](const Array& v) {
      const Array in[] = {v};
      return sum(custom_vjp_call(
          *rule, [](std::span<const Array> a) { return std::vector<Array>{a[0] * 2.0}; }, in)[0]);
    };
    CHECK_THROWS_WITH_AS(grad(f)(x), doctest::Contains("the VJP rule of custom_vjp_call returned"),
                         ValueError);
  }
  CHECK_THROWS_WITH_AS(CustomVjpRule("test.bad_shape", {}), doctest::Contains("already exists"),
                       ValueError);
}

TEST_CASE(
    "CompiledVjp: backward_into hands each cotangent over once; non-differentiable inputs "
    "get zeros from backward_once and no call from backward_into") {
  // f(w, b, x) = sum(w * x) + sum(b): x is marked not differentiable.
  const ArrayFn f = [](std::span<const Array> a) {
    return std::vector<Array>{sum(a[0] * a[2]) + sum(a[1])};
  };
  const Array w = Array::from_vector(std::vector<double>{1.0, 2.0}, Shape{2});
  const Array b = Array::from_vector(std::vector<double>{3.0}, Shape{1});
  const Array x = Array::from_vector(std::vector<double>{5.0, -7.0}, Shape{2});
  const std::vector<AVal> avals{w.aval(), b.aval(), x.aval()};
  const CompiledVjp compiled(f, avals, {true, true, false});
  const std::vector<Array> args{w, b, x};
  const std::vector<Array> ct{Array::scalar(1.0)};

  const std::vector<Array> all = compiled(args).backward_once(ct);
  CHECK(all.at(0).to_vector<double>() == std::vector<double>{5.0, -7.0});
  CHECK(all.at(1).to_vector<double>() == std::vector<double>{1.0});
  CHECK(all.at(2).to_vector<double>() == std::vector<double>{0.0, 0.0});

  std::vector<int> calls(3, 0);
  std::vector<Array> got(3);
  compiled(args).backward_into(ct, [&](std::size_t i, Array g) {
    ++calls.at(i);
    got.at(i) = std::move(g);
  });
  CHECK(calls == std::vector<int>{1, 1, 0});
  CHECK(got[0].to_vector<double>() == std::vector<double>{5.0, -7.0});
  CHECK(got[1].to_vector<double>() == std::vector<double>{1.0});
}

namespace {
// The parameters of the typed-transform tests' linear map: w f64[3], b f64[1].
Tree linear_params() {
  return Tree{{"w", Array::from_vector(std::vector<double>{0.5, -1.0, 2.0}, Shape{3})},
              {"b", Array::from_vector(std::vector<double>{0.25}, Shape{1})}};
}
}  // namespace

TEST_CASE("value_and_grad and grad, typed: a function of Trees and Arrays, differentiated with "
          "respect to its first argument as JAX's argnums=0") {
  const Tree params = linear_params();
  const Array x = random_f64(Shape{4, 3}, 31);
  const auto loss = [](const Tree& p, const Array& v) {
    return sum(square(matmul(v, p["w"].array()) + p["b"].array()));
  };
  const auto [value, g] = value_and_grad(loss)(params, x);
  const ValueAndGrad want = value_and_grad(
      [&](std::span<const Tree> a) { return loss(a[0], a[1].array()); },
      std::vector<Tree>{params, Tree(x)}, std::vector<int>{0});
  CHECK(value.to_vector<double>() == want.value.to_vector<double>());
  CHECK(g["w"].array().to_vector<double>() == want.grads[0]["w"].array().to_vector<double>());
  CHECK(g["b"].array().to_vector<double>() == want.grads[0]["b"].array().to_vector<double>());
  // An Array first argument gives an Array gradient; the others are held constant.
  const Array gx = grad([](const Array& v, const Tree& p) {
    return sum(square(matmul(v, p["w"].array())));
  })(x, params);
  CHECK(gx.shape() == x.shape());
  CHECK(gx.to_vector<double>() ==
        value_and_grad([&](std::span<const Tree> a) {
          return sum(square(matmul(a[0].array(), params["w"].array())));
        }, std::vector<Tree>{Tree(x)}, std::vector<int>{0}).grads[0].array().to_vector<double>());
}

TEST_CASE("vjp, typed: f(Tree, Array) gives its value and a backward function returning a tuple "
          "of cotangents of the arguments' types") {
  const Tree params = linear_params();
  const Array x = random_f64(Shape{4, 3}, 32);
  const auto f = [](const Tree& p, const Array& v) {
    return tanh(matmul(v, p["w"].array()) + p["b"].array());
  };
  const auto [y, back] = vjp(f, params, x);
  CHECK(y.to_vector<double>() == f(params, x).to_vector<double>());
  const Array ct = random_f64(Shape{4}, 33);
  const auto [dp, dx] = back(ct);
  // The span form on the flattened arguments (b, w, x: the tree's leaves in key order).
  const VjpResult want = vjp(
      [&](std::span<const Array> a) {
        return std::vector<Array>{f(Tree{{"b", a[0]}, {"w", a[1]}}, a[2])};
      },
      std::vector<Array>{params["b"].array(), params["w"].array(), x});
  const std::vector<Array> cts = want.backward(std::span<const Array>(&ct, 1));
  CHECK(dp["b"].array().to_vector<double>() == cts[0].to_vector<double>());
  CHECK(dp["w"].array().to_vector<double>() == cts[1].to_vector<double>());
  CHECK(dx.to_vector<double>() == cts[2].to_vector<double>());
}
