// Threefry-2x32 known answers (Random123 / jax tests) and JAX's key derivation in both modes.
// Expected values come from jax's tests and docs (see shared/docs/jax-flax-semantics.md §1).
#include <doctest/doctest.h>

#include "flaxpp/random/distributions.hpp"
#include "flaxpp/random/key.hpp"
#include "kernels/threefry.hpp"

using namespace flaxpp;
using random::Key;
using random::ThreefryMode;
using Words = std::array<std::uint32_t, 2>;

TEST_CASE("threefry2x32: Random123 known-answer vectors") {
  struct Kat {
    std::uint32_t k0, k1, x0, x1, y0, y1;
  };
  for (const Kat& t :
       {Kat{0, 0, 0, 0, 0x6b200159u, 0x99ba4efeu},
        Kat{0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0x1cb996fcu, 0xbb002be7u},
        Kat{0x13198a2eu, 0x03707344u, 0x243f6a88u, 0x85a308d3u, 0xc4923a9cu, 0x483df7a0u}}) {
    const auto y = kernels::threefry2x32(t.k0, t.k1, t.x0, t.x1);
    CHECK(y.x0 == t.y0);
    CHECK(y.x1 == t.y1);
  }
}

TEST_CASE("key: any int64 seed becomes [0, seed mod 2^32], JAX's x64-off rule") {
  CHECK(random::key(0).words() == Words{0, 0});
  CHECK(random::key(-1).words() == Words{0, 4294967295u});
  CHECK(random::key(-3).words() == Words{0, 4294967293u});
  CHECK(random::key(2147483647ll + 100).words() == Words{0, 2147483747u});
  CHECK(random::key(-2147483648ll - 100).words() == Words{0, 2147483548u});
  CHECK(random::key((1ll << 32) + 5).words() == Words{0, 5});
}

TEST_CASE("fold_in: one block with counter (0, data), identical in both modes") {
  CHECK(random::fold_in(random::key(0), 0).words() == Words{1797259609u, 2579123966u});
  CHECK(random::fold_in(random::key(0), 1).words() == Words{928981903u, 3453687069u});
  CHECK(random::fold_in(random::key(0), 4).words() == Words{2285895361u, 433833334u});
  const Key legacy = random::key(0, ThreefryMode::legacy);
  CHECK(random::fold_in(legacy, 4).words() == Words{2285895361u, 433833334u});
  CHECK(random::fold_in(legacy, 4).mode() == ThreefryMode::legacy);
}

TEST_CASE("split: partitionable mode gives split(key, n)[i] == fold_in(key, i)") {
  const auto keys = random::split(random::key(0), 4);
  REQUIRE(keys.size() == 4);
  CHECK(keys[0].words() == Words{1797259609u, 2579123966u});
  CHECK(keys[1].words() == Words{928981903u, 3453687069u});
  CHECK(keys[2].words() == Words{4146024105u, 2718843009u});
  CHECK(keys[3].words() == Words{2467461003u, 3840466878u});
  const Key k = random::key(-7);
  const auto many = random::split(k, 9);
  for (std::uint32_t i = 0; i < 9; ++i)
    CHECK(many[i] == random::fold_in(k, i));
}

TEST_CASE("split: legacy mode pairs the halves of iota(2n) (jax_threefry_partitionable=False)") {
  const auto keys = random::split(random::key(0, ThreefryMode::legacy), 4);
  CHECK(keys[0].words() == Words{2285895361u, 1501764800u});
  CHECK(keys[1].words() == Words{1518642379u, 4090693311u});
  CHECK(keys[2].words() == Words{433833334u, 4221794875u});
  CHECK(keys[3].words() == Words{839183663u, 3740430601u});
  CHECK(keys[2].mode() == ThreefryMode::legacy);
}

TEST_CASE("split: num 0 gives no keys, a negative num is an error; key_data is uint32[n,2]") {
  CHECK(random::split(random::key(1), 0).empty());
  CHECK_THROWS_AS(random::split(random::key(1), -1), ValueError);
  const Array data = random::key_data(random::split(random::key(0), 3));
  CHECK(data.shape() == Shape{3, 2});
  CHECK(data.dtype() == DType::u32);
  CHECK(data.to_vector<std::uint32_t>()[2] == 928981903u);
}

TEST_CASE("bits: jax.random.bits(key(1701), (3,)) in both modes") {
  CHECK(random::bits(random::key(1701), Shape{3}).to_vector<std::uint32_t>() ==
        std::vector<std::uint32_t>{1111271205u, 2679469115u, 974515252u});
  CHECK(
      random::bits(random::key(1701, ThreefryMode::legacy), Shape{3}).to_vector<std::uint32_t>() ==
      std::vector<std::uint32_t>{56197195u, 4200222568u, 961309823u});
}

TEST_CASE("bits: partitionable values depend only on the flat index, legacy values on the size") {
  const auto small = random::bits(random::key(5), Shape{3}).to_vector<std::uint32_t>();
  const auto large = random::bits(random::key(5), Shape{2, 4}).to_vector<std::uint32_t>();
  CHECK(std::equal(small.begin(), small.end(), large.begin()));
  const Key legacy = random::key(5, ThreefryMode::legacy);
  const auto lsmall = random::bits(legacy, Shape{3}).to_vector<std::uint32_t>();
  const auto llarge = random::bits(legacy, Shape{8}).to_vector<std::uint32_t>();
  CHECK_FALSE(std::equal(lsmall.begin(), lsmall.end(), llarge.begin()));
}

TEST_CASE("Key: from_data accepts only uint32[2] key data") {
  CHECK(Key::from_data(random::key(9).data()) == random::key(9));
  CHECK_THROWS_WITH_AS(Key::from_data(Array::full(Shape{3}, 0, DType::u32)),
                       doctest::Contains("uint32[2]"), ValueError);
}
