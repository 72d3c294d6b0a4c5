// Threefry keys: seeding, fold_in, split in both modes, concrete or traced.
#include "flaxpp/random/key.hpp"

#include <optional>

#include "flaxpp/random/traced_key_ops.hpp"
#include "kernels/threefry.hpp"

namespace flaxpp::random {
namespace {

std::optional<TracedKeyOps> registered_ops;

}  // namespace

void register_traced_key_ops(const TracedKeyOps& ops) {
  registered_ops = ops;
}

const TracedKeyOps& traced_key_ops() {
  if (!registered_ops)
    throw ValueError(
        "a traced random key needs the ir layer's random primitives, which no part of this "
        "program registered; link flaxpp::flaxpp (the whole library)");
  return *registered_ops;
}

Key Key::from_data(const Array& data, ThreefryMode mode) {
  if (data.dtype() != DType::u32 || data.shape() != Shape{2})
    throw ValueError(
        detail::str("key data must be uint32[2] (as jax.random.key_data returns), got ",
                    dtype_name(data.dtype()), data.shape()));
  if (data.is_traced()) {
    Key key(0u, 0u, mode);
    key.traced_ = data.tracer_ptr();
    return key;
  }
  const std::vector<std::uint32_t> w = data.to_vector<std::uint32_t>();
  return Key(w[0], w[1], mode);
}

const std::array<std::uint32_t, 2>& Key::words() const {
  if (is_traced())
    throw TracerError(
        "the words of a traced random key exist only when the traced function runs; use "
        "random::fold_in, split, bits, uniform or bernoulli on it inside the function, or pass "
        "a concrete key");
  return words_;
}

Array Key::data() const {
  if (is_traced()) return Array::traced(traced_, AVal{Shape{2}, DType::u32});
  return Array::from_vector(std::vector<std::uint32_t>{words_[0], words_[1]}, Shape{2});
}

bool Key::operator==(const Key& other) const {
  if (is_traced() || other.is_traced()) return traced_ == other.traced_ && mode_ == other.mode_;
  return words_ == other.words_ && mode_ == other.mode_;
}

std::ostream& operator<<(std::ostream& os, const Key& key) {
  const char* mode = key.mode() == ThreefryMode::legacy ? ", legacy]" : "]";
  if (key.is_traced()) return os << "Key[traced" << mode;
  return os << "Key[" << key.words()[0] << ", " << key.words()[1] << mode;
}

Key key(std::int64_t seed, ThreefryMode mode) {
  // With x64 off JAX canonicalises the seed to int32 (keeping its low 32 bits), and the high
  // word — a 32-bit logical shift right by 32 — is 0.
  return Key(0u, static_cast<std::uint32_t>(static_cast<std::uint64_t>(seed) & 0xFFFFFFFFu), mode);
}

Key fold_in(const Key& key, std::uint32_t data) {
  if (key.is_traced())
    return Key::from_data(traced_key_ops().fold_in(key.data(), data), key.mode());
  const kernels::RandomWords fold{
      .op = kernels::RandomWords::Op::fold_in, .partitionable = true, .n = 2, .data = data};
  const auto [k0, k1] = key.words();
  const kernels::U32Pair y = fold.key(k0, k1, 0);
  return Key(y.x0, y.x1, key.mode());
}

std::vector<Key> split(const Key& key, std::int64_t num) {
  if (num < 0) throw ValueError(detail::str("split: num must be >= 0, got ", num));
  std::vector<Key> out;
  out.reserve(static_cast<std::size_t>(num));
  if (key.is_traced()) {
    for (const Array& data : traced_key_ops().split(key.data(), num, key.mode()))
      out.push_back(Key::from_data(data, key.mode()));
    return out;
  }
  const auto n = static_cast<std::uint64_t>(num);
  const kernels::RandomWords words{.op = kernels::RandomWords::Op::split,
                                   .partitionable = key.mode() == ThreefryMode::partitionable,
                                   .n = 2 * n};
  const auto [k0, k1] = key.words();
  for (std::uint64_t i = 0; i < n; ++i) {
    const kernels::U32Pair y = words.key(k0, k1, i);
    out.emplace_back(y.x0, y.x1, key.mode());
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
