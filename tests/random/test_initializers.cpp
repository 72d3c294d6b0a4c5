// jax.nn.initializers: fans, variance scaling and the values Flax's Dense/Linear kernels get.
#include <doctest/doctest.h>

#include <cmath>

#include "flaxpp/random/distributions.hpp"
#include "flaxpp/random/initializers.hpp"

using namespace flaxpp;
namespace init = flaxpp::initializers;

namespace {
void check_leading(const Array& a, std::vector<float> want) {
  const auto got = a.to_vector<float>();
  for (std::size_t i = 0; i < want.size(); ++i)
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(2e-6));
}
}  // namespace

TEST_CASE("compute_fans: dense (in, out), conv (kh, kw, cin, cout) and batch axes") {
  auto fans = init::compute_fans(Shape{3, 4});
  CHECK(fans.fan_in == 3);
  CHECK(fans.fan_out == 4);
  fans = init::compute_fans(Shape{3, 3, 4, 8});
  CHECK(fans.fan_in == 36);
  CHECK(fans.fan_out == 72);
  fans = init::compute_fans(Shape{5, 3, 4}, {-2}, {-1}, {0});
  CHECK(fans.fan_in == 3);
  CHECK(fans.fan_out == 4);
  fans = init::compute_fans(Shape{2, 3, 4}, {0, 1}, {2});
  CHECK(fans.fan_in == 6);
}

TEST_CASE("compute_fans: a 1-D shape with the default in_axis is an error that says what to do") {
  CHECK_THROWS_WITH_AS(init::compute_fans(Shape{5}), doctest::Contains("give in_axis explicitly"),
                       ValueError);
  // JAX: in = out = 5, receptive field 5 / 5 / 5 = 0.2, so fan_in = 1.
  CHECK(init::compute_fans(Shape{5}, {0}, {0}).fan_in == 1);
}

TEST_CASE("lecun_normal: Flax's Dense_0 kernel for PRNGKey(0), MLP 3->4 (semantics §3.4)") {
  // Dense_0/kernel's key is fold_in(key(0), sha1("Dense_0", 1)[:4]) = fold_in(key(0), 0xb2b71315).
  const random::Key k = random::fold_in(random::key(0), 0xb2b71315u);
  CHECK(k.words() == std::array<std::uint32_t, 2>{3043437727u, 3662875008u});
  check_leading(init::lecun_normal()(k, Shape{3, 4}, DType::f32),
                {-0.9536669f, 0.4356405f, -0.7954444f, -0.4919157f, 0.5308103f, 0.7410994f});
  const random::Key legacy =
      random::fold_in(random::key(0, random::ThreefryMode::legacy), 0xb2b71315u);
  check_leading(init::lecun_normal()(legacy, Shape{3, 4}, DType::f32),
                {-0.6432024f, -0.4775521f, -0.9393964f, -0.8308685f});
}

TEST_CASE("lecun_normal: NNX Linear kernels drawn from one Rngs(0) stream (semantics §4.2)") {
  check_leading(init::lecun_normal()(random::fold_in(random::key(0), 0), Shape{3, 4}, DType::f32),
                {0.6178673f, -0.5598722f, -0.4644508f, -0.7150555f, -0.5388409f, 0.3668935f});
  check_leading(init::lecun_normal()(random::fold_in(random::key(0), 2), Shape{4, 4}, DType::f32),
                {0.6797945f, 0.7079946f, -0.2216672f, -0.4147039f, 0.2062282f, 0.01024844f});
}

TEST_CASE("variance_scaling: uniform draws lie in ±sqrt(3·scale/fan) and are uniform·that bound") {
  const random::Key k = random::key(4);
  const Array w = init::variance_scaling(2.0, init::FanMode::fan_avg, init::Distribution::uniform)(
      k, Shape{6, 10}, DType::f32);
  const float bound = std::sqrt(3.0f * static_cast<float>(2.0 / 8.0));
  const auto u = random::uniform(k, Shape{6, 10}, DType::f32, -1, 1).to_vector<float>();
  const auto v = w.to_vector<float>();
  for (std::size_t i = 0; i < v.size(); ++i) {
    CHECK(std::abs(v[i]) <= bound);
    CHECK(v[i] == u[i] * bound);
  }
}

TEST_CASE(
    "initializers: zeros, ones and constant ignore the key; the aliases equal their originals") {
  const random::Key k = random::key(1);
  CHECK(init::zeros()(k, Shape{2, 2}, DType::f32).to_vector<float>() ==
        std::vector<float>(4, 0.0f));
  CHECK(init::ones()(k, Shape{3}, DType::f32).to_vector<float>() == std::vector<float>(3, 1.0f));
  CHECK(init::constant(0.1)(k, Shape{}, DType::f32).to_vector<float>() == std::vector<float>{0.1f});
  CHECK(init::xavier_uniform()(k, Shape{3, 5}, DType::f32).to_vector<float>() ==
        init::glorot_uniform()(k, Shape{3, 5}, DType::f32).to_vector<float>());
  CHECK(init::kaiming_normal()(k, Shape{3, 5}, DType::f32).to_vector<float>() ==
        init::he_normal()(k, Shape{3, 5}, DType::f32).to_vector<float>());
}

TEST_CASE("initializers: mode and distribution names parse as in JAX; others are errors") {
  CHECK(init::fan_mode_from_name("fan_geo_avg") == init::FanMode::fan_geo_avg);
  CHECK(init::distribution_from_name("truncated_normal") == init::Distribution::truncated_normal);
  CHECK_THROWS_WITH_AS(init::fan_mode_from_name("fan_max"),
                       doctest::Contains("expected one of fan_in"), ValueError);
  CHECK_THROWS_AS(init::distribution_from_name("gaussian"), ValueError);
}
