// Traced keys: inside jit, fold_in, split and the draws of a key that is an argument of the
// function are primitives of its graph, bit for bit the host's, so one trace draws anew for
// every key it is given.
#include <doctest/doctest.h>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/random/distributions.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/vmap.hpp"

using namespace flaxpp;

namespace {

// The draws of `key` the traced path covers, as one list of arrays.
std::vector<Tree> draws(const random::Key& key) {
  const Shape shape{3, 5};
  const random::Key folded = random::fold_in(key, 0xDEADBEEFu);
  const std::vector<random::Key> keys = random::split(folded, 3);
  return {Tree(folded.data()),
          Tree(keys[1].data()),
          Tree(keys[2].data()),
          Tree(random::bits(keys[0], shape)),
          Tree(random::uniform(keys[1], Shape{7})),
          Tree(random::uniform(keys[1], Shape{7}, DType::f32, -2.5, 4.0)),
          Tree(random::bernoulli(keys[2], 0.3, shape))};
}

// A function of key data, jitted: the key inside is traced.
Jitted jitted_draws(random::ThreefryMode mode) {
  return jit([mode](std::span<const Tree> a) {
    const random::Key key = random::Key::from_data(a[0].array(), mode);
    CHECK(key.is_traced());
    return draws(key);
  });
}

void check_same(const std::vector<Tree>& traced, const std::vector<Tree>& host) {
  REQUIRE(traced.size() == host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    CAPTURE(i);
    const Array& t = traced[i].array();
    const Array& h = host[i].array();
    REQUIRE(t.aval() == h.aval());
    if (h.dtype() == DType::f32) {
      const std::vector<float> tv = t.to_vector<float>(), hv = h.to_vector<float>();
      // [0, 1) is JAX's bits exactly; other bounds may differ in the last bit (traced_key_ops.hpp)
      for (std::size_t j = 0; j < hv.size(); ++j)
        CHECK(tv[j] == doctest::Approx(hv[j]).epsilon(1e-6));
      if (i == 4) CHECK(tv == hv);
    } else if (h.dtype() == DType::bool_) {
      CHECK(t.to_vector<bool>() == h.to_vector<bool>());
    } else {
      CHECK(t.to_vector<std::uint32_t>() == h.to_vector<std::uint32_t>());
    }
  }
}

}  // namespace

TEST_CASE(
    "traced keys: fold_in, split, bits, uniform and bernoulli inside jit are the host's, "
    "in both modes, one trace for every key") {
  for (const random::ThreefryMode mode :
       {random::ThreefryMode::partitionable, random::ThreefryMode::legacy}) {
    const Jitted f = jitted_draws(mode);
    for (const std::int64_t seed : {0, 7, 123456789}) {
      CAPTURE(seed);
      const random::Key key = random::key(seed, mode);
      check_same(f({Tree(key.data())}), draws(key));
    }
    CHECK(f.num_traces() == 1);
  }
}

TEST_CASE(
    "traced keys: the graph draws with the key primitives, and a traced key's words are "
    "an error") {
  const std::vector<Tree> args{Tree(random::key(1).data())};
  const CompiledStep step = jitted_draws(random::ThreefryMode::partitionable).lower(args);
  const std::string text = step.graph().str();
  for (const char* prim : {"random_fold_in", "random_split", "random_bits"})
    CHECK(text.find(prim) != std::string::npos);
  (void)jit([](std::span<const Tree> a) {
    const random::Key key = random::Key::from_data(a[0].array());
    CHECK_THROWS_AS((void)key.words(), TracerError);
    CHECK_THROWS_WITH_AS((void)random::normal(key, Shape{2}), doctest::Contains("traced"),
                         TracerError);
    return std::vector<Tree>{Tree(random::bits(key, Shape{1}))};
  })({Tree(random::key(1).data())});
}

TEST_CASE("traced keys: a dropout-style mask is constant to the gradient") {
  // d/dx sum(where(bernoulli(k, p), x / p, 0)) = mask / p, with the mask the host draws.
  const random::Key key = random::key(5);
  const Array x = Array::from_vector(std::vector<float>(16, 1.0f), Shape{16});
  const Jitted grad_of = jit([](std::span<const Tree> a) {
    const random::Key k = random::Key::from_data(a[0].array());
    const Tree args[] = {a[1]};
    const int argnums[] = {0};
    const ValueAndGrad r = value_and_grad(
        [&](std::span<const Tree> p) {
          const Array& v = p[0].array();
          const Array keep = random::bernoulli(k, 0.5, v.shape());
          return lax::reduce_sum(
              lax::select(keep, lax::mul(v, lax::scalar(2.0, DType::f32)), lax::zeros_like(v)),
              {0});
        },
        args, argnums);
    return std::vector<Tree>{r.grads[0]};
  });
  const std::vector<bool> mask = random::bernoulli(key, 0.5, Shape{16}).to_vector<bool>();
  const std::vector<float> g = grad_of({Tree(key.data()), Tree(x)})[0].array().to_vector<float>();
  for (std::size_t i = 0; i < mask.size(); ++i)
    CHECK(g[i] == (mask[i] ? 2.0f : 0.0f));
}

TEST_CASE("traced keys under vmap: a batch of keys draws each key's words, stacked") {
  // jax.vmap(lambda k: jax.random.bernoulli(jax.random.fold_in(k, 3), 0.5, (4, 3)))(keys)
  const std::vector<random::Key> keys = random::split(random::key(11), 5);
  const auto draw = [](const Array& data) {
    const random::Key k = random::fold_in(random::Key::from_data(data), 3);
    return random::bernoulli(k, 0.5, Shape{4, 3});
  };
  const Array batched = vmap(draw, {0})(random::key_data(keys));
  REQUIRE(batched.shape() == Shape{5, 4, 3});
  std::vector<bool> want;
  for (const random::Key& k : keys) {
    const std::vector<bool> one = draw(k.data()).to_vector<bool>();
    want.insert(want.end(), one.begin(), one.end());
  }
  CHECK(batched.to_vector<bool>() == want);
}
