// RMSNorm, GroupNorm and the reference problems' ConvBlock and CNN: values against Flax's
// formulas written out here, gradients against float64 central differences, Flax's names with
// and without remat, and errors that name the module. Real-Flax values are in
// tests/refs/cnn.json (norm_grad, cnn_grad, saved_residuals of conv_block_loss).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "flaxpp/nn/cnn.hpp"
#include "flaxpp/nn/normalization.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "harness/finite_diff.hpp"

using namespace flaxpp;
using testing::check_grad;
using testing::random_f64;

namespace {

// model.apply with the given params as a function of (params' leaves..., x).
template <class M>
ArrayFn applied(const nn::Model<M>& model, const Tree& params) {
  return [model, params](std::span<const Array> a) {
    const Tree p = params.with_leaves(a.subspan(0, a.size() - 1));
    return std::vector<Array>{model.apply(nn::Variables{{"params", p}}, a.back())};
  };
}

template <class M>
void check_module_grad(const M& module, const Array& x) {
  const nn::Model<M> model(module);
  const Tree params = model.init(random::key(0), x)["params"];
  std::vector<Array> args;
  for (const Array& leaf : params.leaves())
    args.push_back(leaf + random_f64(leaf.shape(), 7, -0.5, 0.5));  // not all ones and zeros
  args.push_back(x);
  check_grad(applied(model, params), args);
}

}  // namespace

TEST_CASE("RMSNorm: x * rsqrt(mean(x^2) + epsilon) * scale over the last axis") {
  const Array x = random_f64(Shape{3, 5}, 1, -2.0, 2.0);
  const nn::Model model(nn::RMSNorm{.epsilon = 1e-3, .param_dtype = DType::f64});
  const nn::Variables v = model.init(random::key(0), x);
  CHECK(v["params"]["scale"].array().shape() == Shape{5});
  const std::vector<double> xs = x.to_vector<double>(), ys = model.apply(v, x).to_vector<double>();
  for (std::size_t r = 0; r < 3; ++r) {
    double ms = 0;
    for (std::size_t c = 0; c < 5; ++c)
      ms += xs[r * 5 + c] * xs[r * 5 + c] / 5;
    for (std::size_t c = 0; c < 5; ++c)
      CHECK(ys[r * 5 + c] == doctest::Approx(xs[r * 5 + c] / std::sqrt(ms + 1e-3)).epsilon(1e-12));
  }
  check_module_grad(nn::RMSNorm{.param_dtype = DType::f64}, x);
}

TEST_CASE("GroupNorm: statistics per example and channel group, over every other axis") {
  const Array x = random_f64(Shape{2, 3, 2, 6}, 2, -1.0, 3.0);
  const nn::Model model(nn::GroupNorm{.num_groups = 3, .epsilon = 1e-5, .param_dtype = DType::f64});
  const nn::Variables v = model.init(random::key(0), x);
  const std::vector<double> xs = x.to_vector<double>(), ys = model.apply(v, x).to_vector<double>();
  // Example b, group g: the 3 * 2 positions times its 2 channels.
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t g = 0; g < 3; ++g) {
      std::vector<std::size_t> at;
      for (std::size_t p = 0; p < 6; ++p)
        for (std::size_t c = 2 * g; c < 2 * g + 2; ++c)
          at.push_back((b * 6 + p) * 6 + c);
      double mu = 0, mu2 = 0;
      for (const std::size_t i : at) {
        mu += xs[i] / 12;
        mu2 += xs[i] * xs[i] / 12;
      }
      for (const std::size_t i : at)
        CHECK(ys[i] ==
              doctest::Approx((xs[i] - mu) / std::sqrt(mu2 - mu * mu + 1e-5)).epsilon(1e-10));
    }
  check_module_grad(nn::GroupNorm{.num_groups = 2, .param_dtype = DType::f64}, x);
  check_module_grad(
      nn::GroupNorm{.num_groups = std::nullopt, .group_size = 1, .param_dtype = DType::f64},
      random_f64(Shape{3, 4}, 3));
  const nn::Model four(nn::GroupNorm{.num_groups = 4});
  CHECK_THROWS_WITH_AS(four.init(random::key(0), x),
                       doctest::Contains("the number of groups (4) does not divide the number of "
                                         "channels (6)"),
                       ValueError);
  const nn::Model both(nn::GroupNorm{.num_groups = 2, .group_size = 3});
  CHECK_THROWS_WITH_AS(both.init(random::key(0), x),
                       doctest::Contains("exactly one of num_groups and group_size"), ValueError);
}

TEST_CASE("CNN: Flax's child names with and without remat, and the same gradients") {
  const Array x = astype(random_f64(Shape{2, 8, 8, 1}, 4), DType::f32);
  const nn::Model plain(nn::CNN{.features = {3, 4}, .classes = 5});
  const nn::Model remat(
      nn::CNN{.features = {3, 4}, .classes = 5, .policy = checkpoint_policies::nothing_saveable()});
  const Tree p = plain.init(random::key(0), x)["params"];
  const Tree q = remat.init(random::key(0), x)["params"];
  CHECK(p.keys() == std::vector<std::string>{"ConvBlock_0", "ConvBlock_1", "Dense_0"});
  CHECK(q.keys() ==
        std::vector<std::string>{"CheckpointConvBlock_0", "CheckpointConvBlock_1", "Dense_0"});
  CHECK(plain.apply(nn::Variables{{"params", p}}, x).shape() == Shape{2, 5});
  // The remat'd network with the plain one's parameters: the same loss and gradients.
  const auto grads = [&](const auto& model, const Tree& params) {
    return value_and_grad([&](const Tree& w, const Array& v) {
      return sum(square(model.apply(nn::Variables{{"params", w}}, v)));
    })(params, x);
  };
  const auto [loss_p, grad_p] = grads(plain, p);
  const auto [loss_q, grad_q] = grads(remat, q.with_leaves(p.leaves()));
  CHECK(loss_p.item<float>() == loss_q.item<float>());
  const std::vector<Array> gp = grad_p.leaves(), gq = grad_q.leaves();
  REQUIRE(gp.size() == gq.size());
  for (std::size_t i = 0; i < gp.size(); ++i)
    CHECK(gp[i].to_vector<float>() == gq[i].to_vector<float>());
  const nn::Model bn(nn::CNN{.features = {3}, .classes = 5, .use_batchnorm = true});
  CHECK_THROWS_WITH_AS(bn.init(random::key(0), x),
                       doctest::Contains("ConvBlock at ConvBlock_0: use_batchnorm needs BatchNorm"),
                       ValueError);
}
