// Linen-style modules: Flax's key derivation and auto-naming, init/apply, the lifted
// remat<Module>, and errors that name the module path. Expected values are Flax's, from the
// semantics doc's worked examples (§3.4, §4.2).
#include <doctest/doctest.h>

#include "flaxpp/nn/dense.hpp"
#include "flaxpp/nn/dropout.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/nn/nnx.hpp"
#include "flaxpp/nn/remat.hpp"
#include "flaxpp/nn/sequential.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "harness/finite_diff.hpp"

using namespace flaxpp;
using Words = std::array<std::uint32_t, 2>;

namespace {
void check_leading(const Array& a, std::vector<float> want) {
  const auto got = a.to_vector<float>();
  for (std::size_t i = 0; i < want.size(); ++i)
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(2e-6));
}
std::vector<std::string> paths(const Tree& t) {
  std::vector<std::string> out;
  for (const auto& [p, a] : t.flatten())
    out.push_back(p);
  return out;
}

// The design sketch's module: a compact-style struct with a name and one call.
struct TwoLayer {
  static constexpr const char* name = "TwoLayer";
  std::int64_t features = 0;
  Array operator()(nn::Scope& s, const Array& x) const {
    return s(nn::Dense{.features = features}, relu(s(nn::Dense{.features = features}, x)));
  }
};
struct Outer {
  // A root module's name is never read (only children are named), but every module has one.
  [[maybe_unused]] static constexpr const char* name = "Outer";
  Array operator()(nn::Scope& s, const Array& x) const {
    return s(remat<TwoLayer>(checkpoint_policies::dots_saveable())(TwoLayer{.features = 3}), x);
  }
};
// Outer with a policy of the caller's, and its plain form (no remat).
struct OuterWith {
  [[maybe_unused]] static constexpr const char* name = "OuterWith";
  PolicyPtr policy;
  Array operator()(nn::Scope& s, const Array& x) const {
    return s(remat<TwoLayer>(policy)(TwoLayer{.features = 3}), x);
  }
};
struct PlainOuter {
  [[maybe_unused]] static constexpr const char* name = "PlainOuter";
  Array operator()(nn::Scope& s, const Array& x) const { return s(TwoLayer{.features = 3}, x); }
};
struct Net {
  static constexpr const char* name = "Net";
  Array operator()(nn::Scope& s, const Array& x) const {
    return s(nn::Dense{.features = 4}, s(nn::Dropout{.rate = 0.5}, s(nn::Dense{.features = 6}, x)));
  }
};
}  // namespace

TEST_CASE("fold_in_static: Flax's key for (path..., counter) — the semantics doc's table") {
  const random::Key k = random::key(0);
  CHECK(nn::fold_in_static(k, {"Dense_0"}, 1).words() == Words{3043437727u, 3662875008u});
  CHECK(nn::fold_in_static(k, {"Dense_0"}, 2).words() == Words{2912151818u, 3648475384u});
  CHECK(nn::fold_in_static(k, {"Dense_1"}, 1).words() == Words{3520776978u, 4166105696u});
  CHECK(nn::fold_in_static(k, {"Dense_2"}, 1).words() == Words{467669774u, 3426785805u});
  CHECK(nn::fold_in_static(k, {}, 1).words() == Words{1428664606u, 3351135085u});
  CHECK(nn::fold_in_static(k, {"layers_0"}, 1).words() == Words{2492339885u, 3892384954u});
}

TEST_CASE("MLP init: Flax's parameter tree and lecun_normal kernels for PRNGKey(0), 3->4->4->2") {
  const nn::Model model(nn::MLP{.features = {4, 4, 2}});
  const Array x = Array::full(Shape{1, 3}, 1.0, DType::f32);
  const nn::Variables v = model.init(random::key(0), x);
  CHECK(paths(v) == std::vector<std::string>{"params/Dense_0/bias", "params/Dense_0/kernel",
                                             "params/Dense_1/bias", "params/Dense_1/kernel",
                                             "params/Dense_2/bias", "params/Dense_2/kernel"});
  check_leading(v.at("params/Dense_0/kernel").array(),
                {-0.9536669f, 0.4356405f, -0.7954444f, -0.4919157f, 0.5308103f, 0.7410994f});
  check_leading(v.at("params/Dense_1/kernel").array(),
                {0.001663708f, 0.1601259f, 0.09040865f, -0.4202933f, 0.3218943f});
  check_leading(v.at("params/Dense_2/kernel").array(),
                {0.7839002f, -0.1816177f, 0.2157564f, 0.3804209f, -1.022174f});
  CHECK(v.at("params/Dense_2/bias").array().to_vector<float>() == std::vector<float>{0, 0});
}

TEST_CASE("Dense as the root module draws its kernel with the root key (counter 1)") {
  const nn::Model model(nn::Dense{.features = 4});
  const nn::Variables v = model.init(random::key(0), Array::full(Shape{3}, 1.0, DType::f32));
  check_leading(v.at("params/kernel").array(), {0.04769871f, -0.9522832f, -0.9856886f, 0.4428328f});
}

TEST_CASE("remat<M> as the root: the same parameters and outputs as M") {
  const Array x = testing::random_f64(Shape{5, 3}, 1);
  const Array xf = astype(x, DType::f32);
  const nn::Model plain(TwoLayer{.features = 4});
  const auto lifted =
      remat<TwoLayer>(checkpoint_policies::nothing_saveable())(TwoLayer{.features = 4});
  const nn::Variables a = plain.init(random::key(3), xf), b = lifted.init(random::key(3), xf);
  CHECK(paths(a) == paths(b));
  CHECK(a.at("params/Dense_1/kernel").array().to_vector<float>() ==
        b.at("params/Dense_1/kernel").array().to_vector<float>());
  CHECK(plain.apply(a, xf).to_vector<float>() == lifted.apply(b, xf).to_vector<float>());
}

TEST_CASE("remat<M> as an auto-named child is CheckpointM_0, and its keys follow that path") {
  const nn::Model model(Outer{});
  const Array x = Array::full(Shape{2, 5}, 0.5, DType::f32);
  const nn::Variables v = model.init(random::key(0), x);
  CHECK(paths(v) == std::vector<std::string>{"params/CheckpointTwoLayer_0/Dense_0/bias",
                                             "params/CheckpointTwoLayer_0/Dense_0/kernel",
                                             "params/CheckpointTwoLayer_0/Dense_1/bias",
                                             "params/CheckpointTwoLayer_0/Dense_1/kernel"});
  // The kernel's key is fold_in(key(0), sha1("CheckpointTwoLayer_0" "Dense_0" 0x01)).
  const random::Key k = nn::fold_in_static(random::key(0), {"CheckpointTwoLayer_0", "Dense_0"}, 1);
  CHECK(v.at("params/CheckpointTwoLayer_0/Dense_0/kernel").array().to_vector<float>() ==
        initializers::lecun_normal()(k, Shape{5, 3}, DType::f32).to_vector<float>());
}

TEST_CASE("remat<M>(none()) is M: named M_0, the same parameters and outputs") {
  // One type for "no remat" and the policies: a sweep needs no template.
  const Array x = Array::full(Shape{2, 5}, 0.5, DType::f32);
  const nn::Model plain(PlainOuter{});
  const nn::Variables want = plain.init(random::key(0), x);
  for (const PolicyPtr& policy :
       {checkpoint_policies::none(), checkpoint_policies::dots_saveable()}) {
    CAPTURE(policy->str());
    const nn::Model model(OuterWith{.policy = policy});
    const nn::Variables v = model.init(random::key(0), x);
    const std::string child =
        checkpoint_policies::is_none(policy) ? "TwoLayer_0" : "CheckpointTwoLayer_0";
    CHECK(paths(v).front() == "params/" + child + "/Dense_0/bias");
    if (checkpoint_policies::is_none(policy)) {
      CHECK(paths(v) == paths(want));
      for (const std::string& path : paths(v))
        CHECK(v.at(path).array().to_vector<float>() == want.at(path).array().to_vector<float>());
      CHECK(model.apply(v, x).to_vector<float>() == plain.apply(want, x).to_vector<float>());
    }
  }
}

TEST_CASE("value_and_grad through apply: the same gradients with and without remat") {
  const Array x = astype(testing::random_f64(Shape{6, 3}, 2), DType::f32);
  const nn::Model plain(nn::MLP{.features = {5, 5, 2}});
  const nn::Variables v = plain.init(random::key(1), x);
  auto loss = [&](const auto& model) {
    return value_and_grad([&](const Tree& p) {
      return sum(square(model.apply(nn::Variables{{"params", p}}, x)));
    })(v["params"]);
  };
  const auto [l0, g0] = loss(plain);
  for (const PolicyPtr& p :
       {checkpoint_policies::nothing_saveable(), checkpoint_policies::dots_saveable()}) {
    const auto [l1, g1] = loss(remat<nn::MLP>(p)(nn::MLP{.features = {5, 5, 2}}));
    CHECK(l1.to_vector<float>() == l0.to_vector<float>());
    for (const std::string& path : paths(g0))
      CHECK(g1.at(path).array().to_vector<float>() == g0.at(path).array().to_vector<float>());
  }
}

TEST_CASE("Dropout inside remat: the recomputation uses the same mask") {
  const Array x = astype(testing::random_f64(Shape{3, 2}, 4), DType::f32);
  const nn::RngStreams rngs{{"dropout", random::key(9)}};
  const nn::Variables v = nn::Model(Net{}).init(random::key(0), x);
  auto grads = [&](const auto& model) {
    return value_and_grad([&](const Tree& p) {
             return sum(square(model.apply_with_rngs(nn::Variables{{"params", p}}, rngs, x)));
           })(v["params"])
        .second;
  };
  const Tree a = grads(nn::Model(Net{})),
             b = grads(remat<Net>(checkpoint_policies::nothing_saveable())(Net{}));
  for (const std::string& path : paths(a))
    CHECK(a.at(path).array().to_vector<float>() == b.at(path).array().to_vector<float>());
}

TEST_CASE(
    "apply: a wrong input size, missing or extra parameters, a missing rng stream are clear "
    "errors") {
  const nn::Model model(nn::MLP{.features = {4, 2}});
  const nn::Variables v = model.init(random::key(0), Array::full(Shape{2, 3}, 1.0, DType::f32));
  CHECK_THROWS_WITH_AS(
      model.apply(v, Array::full(Shape{2, 5}, 1.0, DType::f32)),
      doctest::Contains("params/Dense_0/kernel is f32[3,4], but module Dense_0 expects f32[5,4]"),
      ValueError);
  CHECK_THROWS_WITH_AS(model.apply(nn::Variables{}, Array::full(Shape{2, 3}, 1.0, DType::f32)),
                       doctest::Contains("module Dense_0 needs parameter params/Dense_0/kernel"),
                       ValueError);
  nn::Variables extra = v;
  extra.set_at(std::vector<std::string>{"params", "Dense_9", "kernel"}, Array::scalar(1.0f));
  CHECK_THROWS_WITH_AS(model.apply(extra, Array::full(Shape{2, 3}, 1.0, DType::f32)),
                       doctest::Contains("does not use: params/Dense_9/kernel"), ValueError);
  const nn::Model drop(nn::Dropout{.rate = 0.5});
  CHECK_THROWS_WITH_AS(drop.apply(nn::Variables{}, Array::full(Shape{3}, 1.0, DType::f32)),
                       doctest::Contains("needs a key from the rng stream \"dropout\""),
                       ValueError);
}

TEST_CASE("nnx: Rngs(0) hands out fold_in(key(0), n); Linear kernels match Flax NNX") {
  nnx::Rngs rngs(0);
  CHECK(rngs.params().words() == Words{1797259609u, 2579123966u});  // fold_in(key(0), 0)
  nnx::Rngs fresh(0);
  const nnx::Linear l0(3, 4, fresh), l1(4, 4, fresh);
  check_leading(l0.kernel(),
                {0.6178673f, -0.5598722f, -0.4644508f, -0.7150555f, -0.5388409f, 0.3668935f});
  check_leading(l1.kernel(),
                {0.6797945f, 0.7079946f, -0.2216672f, -0.4147039f, 0.2062282f, 0.01024844f});
  const nnx::List<nnx::Linear> list{{l0, l1}};
  CHECK(paths(nnx::state(list)) ==
        std::vector<std::string>{"0/bias", "0/kernel", "1/bias", "1/kernel"});
  // nnx.Linear(3, 4, use_bias=False, rngs=...): the same kernel draw, no bias.
  nnx::Rngs again(0);
  const nnx::Linear no_bias(3, 4, again, {.use_bias = false});
  CHECK(paths(no_bias.state()) == std::vector<std::string>{"kernel"});
  CHECK(no_bias.kernel().to_vector<float>() == l0.kernel().to_vector<float>());
}

TEST_CASE("Sequential: module entries are named layers_<index>; functions take no scope") {
  const nn::Model model(nn::Sequential{{nn::layer(nn::Dense{.features = 3}), nn::layer(&relu),
                                        nn::layer(nn::Dense{.features = 2})}});
  const Array x = Array::full(Shape{4, 5}, 0.5, DType::f32);
  const nn::Variables v = model.init(random::key(0), x);
  CHECK(paths(v) == std::vector<std::string>{"params/layers_0/bias", "params/layers_0/kernel",
                                             "params/layers_2/bias", "params/layers_2/kernel"});
  CHECK(model.apply(v, x).shape() == Shape{4, 2});
}

namespace {
struct Counter {
  [[maybe_unused]] static constexpr const char* name = "Counter";  // a root module: never read
  Array operator()(nn::Scope& s, const Array& x) const {
    const Array c = s.variable("batch_stats", "mean", [&] { return zeros(Shape{x.shape()[-1]}); });
    return x - c;
  }
};
}  // namespace

TEST_CASE(
    "Scope::variable: other collections are created at init, draw no key, and are read at apply") {
  const nn::Model model(Counter{});
  const Array x = Array::full(Shape{2, 3}, 1.0, DType::f32);
  const nn::Variables v = model.init(random::key(0), x);
  CHECK(paths(v) == std::vector<std::string>{"batch_stats/mean"});
  CHECK(model.apply(v, x).to_vector<float>() == std::vector<float>(6, 1.0f));
  CHECK_THROWS_WITH_AS(model.apply(nn::Variables{}, x),
                       doctest::Contains("needs variable batch_stats/mean"), ValueError);
}
