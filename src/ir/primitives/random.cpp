// The key primitives (random_bits, random_fold_in, random_split) and what a traced key does
// with them: registered with the random layer as the program starts (traced_key_ops.hpp).
#include "flaxpp/ir/lax_random.hpp"

#include "flaxpp/random/distributions.hpp"
#include "flaxpp/random/traced_key_ops.hpp"
#include "rules.hpp"

namespace flaxpp::lax {
namespace {

void expect_key(const std::string& prim, std::span<const AVal> in) {
  rules::expect_arity(prim, in, 1);
  if (in[0] != AVal{Shape{2}, DType::u32})
    rules::fail(prim,
                detail::str("expected key data uint32[2] (jax.random.key_data), got ", in[0]));
}

random::ThreefryMode mode_of(const ir::Params& p) {
  return p.get<bool>("partitionable") ? random::ThreefryMode::partitionable
                                      : random::ThreefryMode::legacy;
}

bool partitionable(random::ThreefryMode mode) {
  return mode == random::ThreefryMode::partitionable;
}

std::vector<Array> no_gradient(const ir::VjpArgs&) {
  return {Array()};
}

// Row j of a (n, ...) array, without its leading axis: key j of a (n, 2) array of keys.
Array row(const Array& a, std::int64_t j) {
  std::vector<std::int64_t> start(static_cast<std::size_t>(a.shape().rank()), 0),
      stop = a.shape().dims();
  start[0] = j;
  stop[0] = j + 1;
  return reshape(slice(a, start, stop), Shape(std::vector(stop.begin() + 1, stop.end())));
}

}  // namespace

const ir::Primitive random_bits_p(
    "random_bits",
    [](std::span<const AVal> in, const ir::Params& p) {
      expect_key("random_bits", in);
      const Shape shape(p.get<std::vector<std::int64_t>>("shape"));
      random::check_bits_count(shape, mode_of(p));
      return std::vector<AVal>{{shape, DType::u32}};
    },
    no_gradient);

const ir::Primitive random_fold_in_p(
    "random_fold_in",
    [](std::span<const AVal> in, const ir::Params& p) {
      expect_key("random_fold_in", in);
      const std::int64_t data = p.get<std::int64_t>("data");
      if (data < 0 || data > 0xFFFFFFFFll)
        rules::fail("random_fold_in", detail::str("data must be in [0, 2^32), got ", data));
      return std::vector<AVal>{{Shape{2}, DType::u32}};
    },
    no_gradient);

const ir::Primitive random_split_p(
    "random_split",
    [](std::span<const AVal> in, const ir::Params& p) {
      expect_key("random_split", in);
      const std::int64_t num = p.get<std::int64_t>("num");
      if (num < 0) rules::fail("random_split", detail::str("num must be >= 0, got ", num));
      return std::vector<AVal>{{Shape{num, 2}, DType::u32}};
    },
    no_gradient);

Array random_bits(const Array& key, const Shape& shape, random::ThreefryMode mode) {
  const Array in[] = {key};
  return ir::bind1(random_bits_p, in,
                   {{"shape", shape.dims()}, {"partitionable", partitionable(mode)}});
}

Array random_fold_in(const Array& key, std::uint32_t data) {
  const Array in[] = {key};
  return ir::bind1(random_fold_in_p, in, {{"data", static_cast<std::int64_t>(data)}});
}

Array random_split(const Array& key, std::int64_t num, random::ThreefryMode mode) {
  const Array in[] = {key};
  return ir::bind1(random_split_p, in, {{"num", num}, {"partitionable", partitionable(mode)}});
}

namespace {

// jax.random._uniform for float32 in [0, 1): the top 23 bits as the mantissa under exponent 0,
// minus 1. Written with arithmetic the graph has: bits / 2^9 (a shift for uint32) converted to
// float32 and times 2^-23 — exact, so the same floats.
Array unit_uniform(const Array& key, const Shape& shape, random::ThreefryMode mode) {
  const Array mantissa = div(random_bits(key, shape, mode), scalar(512.0, DType::u32));
  return mul(convert_element_type(mantissa, DType::f32), scalar(0x1p-23, DType::f32));
}

// A batch of keys (size, 2): each key's equation, the results stacked. (JAX maps threefry over
// the keys elementwise; here one equation per key, which is what the batches of keys that
// vmap meets, a few per-example keys, need.)
ir::BatchedResults batch_keys(const ir::BatchArgs& a) {
  std::vector<Array> per_key;
  for (std::int64_t b = 0; b < a.size; ++b) {
    const Array in[] = {row(a.inputs[0], b)};
    const Array out = ir::bind1(a.prim, in, a.params);
    std::vector<std::int64_t> dims = out.shape().dims();
    dims.insert(dims.begin(), 1);
    per_key.push_back(reshape(out, Shape(dims)));
  }
  return {{concatenate(per_key, 0)}, {true}};
}

const bool key_batching_registered = [] {
  for (const ir::Primitive* prim : {&random_bits_p, &random_fold_in_p, &random_split_p})
    ir::register_batching(*prim, batch_keys);
  return true;
}();

const bool traced_key_ops_registered = [] {
  random::register_traced_key_ops({
      .fold_in = random_fold_in,
      .split =
          [](const Array& key, std::int64_t num, random::ThreefryMode mode) {
            const Array keys = random_split(key, num, mode);
            std::vector<Array> out;
            for (std::int64_t i = 0; i < num; ++i)
              out.push_back(row(keys, i));
            return out;
          },
      .bits = random_bits,
      .uniform =
          [](const Array& key, const Shape& shape, random::ThreefryMode mode, float minval,
             float maxval) {
            const Array f = unit_uniform(key, shape, mode);
            if (minval == 0.0f && maxval == 1.0f) return f;  // f * 1 + 0, max(0, f): f
            const Array lo = scalar(minval, DType::f32);
            return max(lo, add(mul(f, scalar(maxval - minval, DType::f32)), lo));
          },
      .bernoulli =
          [](const Array& key, const Shape& shape, random::ThreefryMode mode, float threshold) {
            return lt(unit_uniform(key, shape, mode), scalar(threshold, DType::f32));
          },
  });
  return true;
}();

}  // namespace

}  // namespace flaxpp::lax
