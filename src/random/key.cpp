// Threefry keys: seeding, fold_in, split in both modes.
#include "flaxpp/random/key.hpp"

#include "kernels/threefry.hpp"

namespace flaxpp::random {

Key Key::from_data(const Array& data, ThreefryMode mode) {
  if (data.dtype() != DType::u32 || data.shape() != Shape{2})
    throw ValueError(
        detail::str("key data must be uint32[2] (as jax.random.key_data returns), got ",
                    dtype_name(data.dtype()), data.shape()));
  const std::vector<std::uint32_t> w = data.to_vector<std::uint32_t>();
  return Key(w[0], w[1], mode);
}

Array Key::data() const {
  return Array::from_vector(std::vector<std::uint32_t>{words_[0], words_[1]}, Shape{2});
}

std::ostream& operator<<(std::ostream& os, const Key& key) {
  return os << "Key[" << key.words()[0] << ", " << key.words()[1]
            << (key.mode() == ThreefryMode::legacy ? ", legacy]" : "]");
}

Key key(std::int64_t seed, ThreefryMode mode) {
  // With x64 off JAX canonicalises the seed to int32 (keeping its low 32 bits), and the high
  // word — a 32-bit logical shift right by 32 — is 0.
  return Key(0u, static_cast<std::uint32_t>(static_cast<std::uint64_t>(seed) & 0xFFFFFFFFu), mode);
}

Key fold_in(const Key& key, std::uint32_t data) {
  const auto y = kernels::threefry2x32(key.words()[0], key.words()[1], 0u, data);
  return Key(y.x0, y.x1, key.mode());
}

std::vector<Key> split(const Key& key, std::int64_t num) {
  if (num < 0) throw ValueError(detail::str("split: num must be >= 0, got ", num));
  const auto [k0, k1] = key.words();
  const auto n = static_cast<std::uint64_t>(num);
  std::vector<Key> out;
  out.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    if (key.mode() == ThreefryMode::partitionable) {
      const auto y = kernels::threefry_at_index(k0, k1, i);
      out.emplace_back(y.x0, y.x1, key.mode());
    } else {
      // Legacy: threefry_2x32(key, iota(2n)) reshaped to (n, 2).
      out.emplace_back(kernels::legacy_iota_word(k0, k1, 2 * n, 2 * i),
                       kernels::legacy_iota_word(k0, k1, 2 * n, 2 * i + 1), key.mode());
    }
  }
  return out;
}

Array key_data(const std::vector<Key>& keys) {
  std::vector<std::uint32_t> words;
  words.reserve(2 * keys.size());
  for (const Key& k : keys)
    words.insert(words.end(), k.words().begin(), k.words().end());
  return Array::from_vector(words, Shape{static_cast<std::int64_t>(keys.size()), 2});
}

}  // namespace flaxpp::random
