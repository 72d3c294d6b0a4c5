// The index primitives — iota, take, scatter_add — on the default device (ctest reruns the
// suite on CUDA): hand-computed results in every dtype they take, repeated and empty indices,
// scatter_add's index-order sums (equal on every backend), refused indices and operands.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

using namespace flaxpp;

namespace {

Array ids(std::vector<std::int32_t> v, Shape shape) {
  return Array::from_vector(v, std::move(shape));
}

// The values of any numeric array as float64, for one comparison per case.
std::vector<double> f64_values(const Array& a) {
  return astype(a.to(Device::cpu()), DType::f64).to_vector<double>();
}

}  // namespace

TEST_CASE("iota: each element is its index along the dimension, in every numeric dtype") {
  for (const DType dt : {DType::f32, DType::f64, DType::i32, DType::u32}) {
    INFO(dtype_name(dt));
    const Array rows = lax::iota(dt, Shape{2, 3}, 0);
    CHECK(rows.aval() == AVal{Shape{2, 3}, dt});
    CHECK(f64_values(rows) == std::vector<double>{0, 0, 0, 1, 1, 1});
    CHECK(f64_values(lax::iota(dt, Shape{2, 3}, 1)) == std::vector<double>{0, 1, 2, 0, 1, 2});
    CHECK(f64_values(lax::iota(dt, Shape{4})) == std::vector<double>{0, 1, 2, 3});
  }
  CHECK(lax::iota(DType::i32, Shape{0, 3}, 1).size() == 0);
  CHECK_THROWS_WITH_AS(lax::iota(DType::i32, Shape{2}, 1), doctest::Contains("dimension 1"),
                       ValueError);
  CHECK_THROWS_WITH_AS(lax::iota(DType::bool_, Shape{2}, 0), doctest::Contains("bool"), ValueError);
}

TEST_CASE("take: rows of x at the indices, shaped (indices..., rest...), in every dtype") {
  const std::vector<double> table{0, 1, 10, 11, 20, 21};  // (3, 2)
  for (const DType dt : {DType::f32, DType::f64, DType::i32, DType::u32}) {
    INFO(dtype_name(dt));
    const Array x = astype(Array::from_vector(table, Shape{3, 2}), dt);
    const Array y = lax::take(x, ids({2, 0, 2, 1}, Shape{2, 2}));
    CHECK(y.aval() == AVal{Shape{2, 2, 2}, dt});
    CHECK(f64_values(y) == std::vector<double>{20, 21, 0, 1, 20, 21, 10, 11});
    CHECK(f64_values(lax::take(x, ids({1}, Shape{}))) == std::vector<double>{10, 11});
    CHECK(lax::take(x, ids({}, Shape{0})).aval() == AVal{Shape{0, 2}, dt});
  }
  const Array flags = Array::from_vector(std::vector<bool>{true, false, true}, Shape{3});
  CHECK(lax::take(flags, ids({1, 2, 1}, Shape{3})).to_vector<bool>() ==
        std::vector<bool>{false, true, false});
}

TEST_CASE("scatter_add: each update is added to its row, repeated rows in index order") {
  for (const DType dt : {DType::f32, DType::f64, DType::i32}) {
    INFO(dtype_name(dt));
    const Array x =
        astype(Array::from_vector(std::vector<double>{1, 1, 2, 2, 3, 3}, Shape{3, 2}), dt);
    const Array u =
        astype(Array::from_vector(std::vector<double>{10, 20, 30, 40, 50, 60}, Shape{3, 2}), dt);
    const Array y = lax::scatter_add(x, ids({2, 0, 2}, Shape{3}), u);
    CHECK(y.aval() == x.aval());
    CHECK(f64_values(y) == std::vector<double>{31, 41, 2, 2, 63, 83});
  }
  // float32 sums in index order: 0 + 1e8 + 1 - 1e8 is 0 (the 1 is lost next to 1e8); in any
  // other order it could be 1. Every backend adds in this order, so results agree bit for bit.
  const Array zero = zeros(Shape{2, 1});
  const Array u = Array::from_vector(std::vector<float>{1e8f, 5, 1, -1e8f}, Shape{4, 1});
  CHECK(lax::scatter_add(zero, ids({0, 1, 0, 0}, Shape{4}), u).to_vector<float>() ==
        std::vector<float>{0, 5});
  // No updates: the operand itself.
  CHECK(lax::scatter_add(zero, ids({}, Shape{0}), zeros(Shape{0, 1})).to_vector<float>() ==
        std::vector<float>{0, 0});
}

TEST_CASE("take and scatter_add refuse indices outside [0, N), naming the index") {
  // On the CPU the primitive itself refuses; on a GPU the kernel records the index and the
  // error comes at the next synchronisation with the host: here, reading the result.
  const Array x = zeros(Shape{3, 2});
  CHECK_THROWS_WITH_AS(lax::take(x, ids({0, 3}, Shape{2})).to_vector<float>(),
                       doctest::Contains("index 3 (element 1"), ValueError);
  CHECK_THROWS_WITH_AS(lax::take(x, ids({-1}, Shape{1})).to_vector<float>(),
                       doctest::Contains("outside [0, 3)"), ValueError);
  CHECK_THROWS_WITH_AS(lax::scatter_add(x, ids({0, 5}, Shape{2}), zeros(Shape{2, 2}))
                           .to_vector<float>(),
                       doctest::Contains("index 5 (element 1"), ValueError);
  // Once reported, an error is not reported again.
  CHECK(lax::take(x, ids({2}, Shape{1})).to_vector<float>() == std::vector<float>{0, 0});
}

TEST_CASE("scatter_add: many updates to few rows sum in index order, as on the CPU") {
  // On a GPU the updates are grouped by row on the device (a stable sort): each row's sums
  // must equal the CPU's bit for bit, rows without updates keep the operand's values.
  const std::int64_t rows = 37, m = 1000, r = 3;
  std::vector<std::int32_t> idx(m);
  std::vector<float> upd(m * r), base(rows * r);
  for (std::int64_t j = 0; j < m; ++j) idx[j] = static_cast<std::int32_t>((j * 7919) % (rows - 2));
  for (std::size_t k = 0; k < upd.size(); ++k) upd[k] = 1.0f / static_cast<float>(k % 97 + 1);
  for (std::size_t k = 0; k < base.size(); ++k) base[k] = static_cast<float>(k);
  const Array x = Array::from_vector(base, Shape{rows, r}), u = Array::from_vector(upd, Shape{m, r});
  const Array i = ids(idx, Shape{m});
  const Array on_cpu = lax::scatter_add(x.to(Device::cpu()), i.to(Device::cpu()), u.to(Device::cpu()));
  CHECK(lax::scatter_add(x, i, u).to_vector<float>() == on_cpu.to_vector<float>());
}

TEST_CASE("take and scatter_add: shape rules name what they expected") {
  const Array x = zeros(Shape{3, 2});
  CHECK_THROWS_WITH_AS(lax::take(x, zeros(Shape{2})), doctest::Contains("indices must be int32"),
                       ValueError);
  CHECK_THROWS_WITH_AS(lax::take(zeros(Shape{}), ids({0}, Shape{1})),
                       doctest::Contains("needs a leading axis"), ValueError);
  CHECK_THROWS_WITH_AS(lax::scatter_add(x, ids({0}, Shape{1}), zeros(Shape{2, 2})),
                       doctest::Contains("updates must be f32[1,2]"), ValueError);
}
