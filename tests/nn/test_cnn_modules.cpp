// BatchNorm with mutable batch statistics, RMSNorm, GroupNorm and the reference problems'
// ConvBlock and CNN: values against Flax's formulas written out here, gradients against
// float64 central differences, Flax's names with and without remat, and errors that name the
// module. Real-Flax values are in tests/refs/cnn.json (batchnorm, norm_grad, cnn_grad,
// saved_residuals of conv_block_loss).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "flaxpp/nn/cnn.hpp"
#include "flaxpp/nn/normalization.hpp"
#include "flaxpp/nn/remat.hpp"
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

// A BatchNorm that trains, inside nn::remat or plain.
struct PlainBatchNorm {
  static constexpr const char* name = "PlainBatchNorm";
  Array operator()(nn::Scope& s, const Array& x) const {
    return s(nn::BatchNorm{.use_running_average = false, .param_dtype = DType::f64}, x);
  }
};
struct RematBatchNorm {
  static constexpr const char* name = "RematBatchNorm";
  Array operator()(nn::Scope& s, const Array& x) const {
    return s(remat<nn::BatchNorm>(checkpoint_policies::nothing_saveable())(
                 nn::BatchNorm{.use_running_average = false, .param_dtype = DType::f64}),
             x);
  }
};

}  // namespace

TEST_CASE("BatchNorm: batch statistics, running averages through apply_mutable, and its errors") {
  const Array x = random_f64(Shape{6, 3}, 8, -1.0, 2.0);
  const nn::BatchNorm bn{.momentum = 0.75, .param_dtype = DType::f64};
  const nn::Model model(bn);
  const nn::Variables v = model.init(random::key(0), x, false);
  // init makes the statistics (zeros, ones) and leaves them as they are.
  CHECK(v["batch_stats"]["mean"].array().to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(v["batch_stats"]["var"].array().to_vector<float>() == std::vector<float>{1, 1, 1});
  auto [y, updates] = model.apply_mutable(v, {"batch_stats"}, x, false);
  REQUIRE(updates.keys() == std::vector<std::string>{"batch_stats"});
  const std::vector<double> xs = x.to_vector<double>(), ys = y.to_vector<double>();
  const std::vector<float> ra_mean = updates["batch_stats"]["mean"].array().to_vector<float>();
  const std::vector<float> ra_var = updates["batch_stats"]["var"].array().to_vector<float>();
  for (std::size_t c = 0; c < 3; ++c) {
    double mu = 0, mu2 = 0;
    for (std::size_t r = 0; r < 6; ++r) {
      mu += xs[r * 3 + c] / 6;
      mu2 += xs[r * 3 + c] * xs[r * 3 + c] / 6;
    }
    const double var = mu2 - mu * mu;
    for (std::size_t r = 0; r < 6; ++r)
      CHECK(ys[r * 3 + c] == doctest::Approx((xs[r * 3 + c] - mu) / std::sqrt(var + 1e-5)));
    CHECK(ra_mean[c] == doctest::Approx(0.25 * mu).epsilon(1e-6));
    CHECK(ra_var[c] == doctest::Approx(0.75 + 0.25 * var).epsilon(1e-6));
  }
  // With the running averages: (x - mean) / sqrt(var + epsilon), per feature.
  const nn::Variables eval{{"params", v["params"]}, {"batch_stats", updates["batch_stats"]}};
  const std::vector<double> ye = model.apply(eval, x, true).to_vector<double>();
  CHECK(ye[1] == doctest::Approx((xs[1] - ra_mean[1]) / std::sqrt(ra_var[1] + 1e-5)));
  // One process: axis_name's average over the processes changes nothing.
  nn::BatchNorm named = bn;
  named.axis_name = "batch";
  const auto [y_named, updates_named] =
      nn::Model(named).apply_mutable(v, {"batch_stats"}, x, false);
  CHECK(y_named.to_vector<double>() == ys);
  CHECK(updates_named["batch_stats"]["mean"].array().to_vector<float>() == ra_mean);
  // A mutable collection the variables lack is made during apply, as in Flax.
  const auto [y2, made] =
      model.apply_mutable(nn::Variables{{"params", v["params"]}}, {"batch_stats"}, x, false);
  CHECK(made["batch_stats"]["mean"].array().to_vector<float>() == ra_mean);
  CHECK(y2.to_vector<double>() == ys);
  // Training without making batch_stats mutable is Flax's error, naming module and variable.
  CHECK_THROWS_WITH_AS(model.apply(v, x, false),
                       doctest::Contains("module (root) updates variable batch_stats/mean, but "
                                         "collection \"batch_stats\" is not mutable"),
                       ValueError);
  CHECK_THROWS_WITH_AS(model.apply_mutable(v, {"params"}, x, false),
                       doctest::Contains("\"params\" cannot be mutable"), ValueError);
  CHECK_THROWS_WITH_AS(model.apply(v, x), doctest::Contains("use_running_average is given neither"),
                       ValueError);
  const nn::Model fixed(nn::BatchNorm{.use_running_average = true});
  CHECK_THROWS_WITH_AS(fixed.init(random::key(0), x, true),
                       doctest::Contains("given both to the module and to the call"), ValueError);
  // The normalised output's gradient in training mode, the statistics held as aux.
  const Tree params = v["params"];
  std::vector<Array> args = params.leaves();
  args.push_back(x);
  check_grad(
      [&](std::span<const Array> a) {
        const nn::Variables w{{"params", params.with_leaves(a.subspan(0, a.size() - 1))},
                              {"batch_stats", v["batch_stats"]}};
        return std::vector<Array>{model.apply_mutable(w, {"batch_stats"}, a.back(), false).first};
      },
      args);
}

TEST_CASE("mutable collections: nn::remat carries the statistics out of its region") {
  const Array x = random_f64(Shape{4, 2}, 9);
  const nn::Model remat_model(RematBatchNorm{});
  const nn::Model plain(PlainBatchNorm{});
  const nn::Variables v = remat_model.init(random::key(0), x);
  CHECK(v["batch_stats"].keys() == std::vector<std::string>{"CheckpointBatchNorm_0"});
  // The same variables under the plain module's names.
  const nn::Variables w{
      {"params", Tree{{"BatchNorm_0", v["params"]["CheckpointBatchNorm_0"]}}},
      {"batch_stats", Tree{{"BatchNorm_0", v["batch_stats"]["CheckpointBatchNorm_0"]}}}};
  const auto [y, updates] = remat_model.apply_mutable(v, {"batch_stats"}, x);
  const auto [y_plain, updates_plain] = plain.apply_mutable(w, {"batch_stats"}, x);
  CHECK(y.to_vector<double>() == y_plain.to_vector<double>());
  for (const char* stat : {"mean", "var"}) {
    INFO(stat);
    CHECK(updates["batch_stats"]["CheckpointBatchNorm_0"][stat].array().to_vector<float>() ==
          updates_plain["batch_stats"]["BatchNorm_0"][stat].array().to_vector<float>());
  }
  // Statistics the variables lack are made inside the region and leave it too.
  const auto [y_made, made] =
      remat_model.apply_mutable(nn::Variables{{"params", v["params"]}}, {"batch_stats"}, x);
  CHECK(y_made.to_vector<double>() == y.to_vector<double>());
  CHECK(made["batch_stats"]["CheckpointBatchNorm_0"]["mean"].array().to_vector<float>() ==
        updates["batch_stats"]["CheckpointBatchNorm_0"]["mean"].array().to_vector<float>());
  // Differentiated, the statistics are the region's extra results: the loss's gradient is the
  // plain module's.
  const auto loss = [&](const auto& model, const nn::Variables& vars) {
    return value_and_grad([&](const Tree& p, const Array& in) {
      return sum(square(
          model
              .apply_mutable(nn::Variables{{"params", p}, {"batch_stats", vars["batch_stats"]}},
                             {"batch_stats"}, in)
              .first));
    })(vars["params"], x);
  };
  const auto [l_remat, g_remat] = loss(remat_model, v);
  const auto [l_plain, g_plain] = loss(plain, w);
  CHECK(l_remat.item<double>() == l_plain.item<double>());
  CHECK(g_remat.leaves()[0].to_vector<double>() == g_plain.leaves()[0].to_vector<double>());
}

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
  // With batch norm: statistics per block, updated by a training call through apply_mutable.
  const nn::Model bn(nn::CNN{.features = {3}, .classes = 5, .use_batchnorm = true});
  const nn::Variables vb = bn.init(random::key(0), x);
  CHECK(vb["batch_stats"]["ConvBlock_0"].keys() == std::vector<std::string>{"BatchNorm_0"});
  const auto [logits, updates] = bn.apply_mutable(vb, {"batch_stats"}, x, true);
  CHECK(logits.shape() == Shape{2, 5});
  CHECK(updates["batch_stats"]["ConvBlock_0"]["BatchNorm_0"]["mean"].array().to_vector<float>() !=
        vb["batch_stats"]["ConvBlock_0"]["BatchNorm_0"]["mean"].array().to_vector<float>());
  CHECK_THROWS_WITH_AS(bn.apply(vb, x, true), doctest::Contains("is not mutable"), ValueError);
}
