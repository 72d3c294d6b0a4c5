// Array: construction, read-back, immutability through sharing, device transfer errors.
#include <doctest/doctest.h>

#include <sstream>

#include "flaxpp/core/array.hpp"

using namespace flaxpp;

TEST_CASE("Array: from_vector keeps shape, dtype and values") {
  const Array a = Array::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
  CHECK(a.shape() == Shape{2, 3});
  CHECK(a.dtype() == DType::f32);
  CHECK(a.device() == Device::cpu());
  CHECK(a.nbytes() == 24);
  CHECK(a.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(a.host_span<float>()[4] == 5.0f);
}

TEST_CASE("Array: scalars, bools and integers round-trip") {
  CHECK(Array::scalar(7).to_vector<std::int32_t>() == std::vector<std::int32_t>{7});
  CHECK(Array::scalar(7).shape() == Shape{});
  const Array b = Array::from_vector(std::vector<bool>{true, false, true}, Shape{3});
  CHECK(b.dtype() == DType::bool_);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(b.host_span<std::uint8_t>()[1] == 0);
  const Array u = Array::full(Shape{2}, 4294967295.0, DType::u32);
  CHECK(u.to_vector<std::uint32_t>() == std::vector<std::uint32_t>{4294967295u, 4294967295u});
}

TEST_CASE("Array: item() reads the one element of any shape, like jax.Array.item()") {
  CHECK(Array::scalar(2.5f).item<float>() == 2.5f);
  CHECK(Array::scalar<std::int32_t>(-7).item<std::int32_t>() == -7);
  CHECK(Array::from_vector(std::vector<bool>{true}, Shape{1, 1}).item<bool>());
  CHECK(Array::from_vector(std::vector<double>{0.25}, Shape{1, 1, 1}).item<double>() == 0.25);
  CHECK_THROWS_WITH_AS(
      Array::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3}).item<float>(),
      doctest::Contains("expected an array with exactly one element, got "
                        "f32[2,3] (6 elements); index or reduce it first"),
      ValueError);
  CHECK_THROWS_AS(Array::from_vector(std::vector<float>{}, Shape{0}).item<float>(), ValueError);
  CHECK_THROWS_AS(Array::scalar(1.0f).item<std::int32_t>(), ValueError);  // wrong type
}

TEST_CASE("Array: copies share one buffer") {
  const Array a = Array::full(Shape{3}, 1.5, DType::f32);
  const Array b = a;  // NOLINT(performance-unnecessary-copy-initialization): sharing is the point
  CHECK(&a.buffer() == &b.buffer());
  CHECK(a.to(Device::cpu()).valid());
  CHECK(&a.to(Device::cpu()).buffer() == &a.buffer());
}

TEST_CASE("Array: reading with the wrong element type is a clear error") {
  const Array a = Array::full(Shape{2}, 1.0, DType::f32);
  CHECK_THROWS_WITH_AS(a.to_vector<std::int32_t>(),
                       doctest::Contains("array has dtype float32, read as int32"), ValueError);
  CHECK_THROWS_AS(a.host_span<double>(), ValueError);
}

TEST_CASE("Array: a value count that does not match the shape is rejected") {
  CHECK_THROWS_WITH_AS(Array::from_vector(std::vector<float>{1, 2, 3}, Shape{2, 2}),
                       doctest::Contains("needs 4 elements, got 3"), ValueError);
}

TEST_CASE("Array: a null array says so instead of crashing") {
  const Array a;
  CHECK_FALSE(a.valid());
  CHECK_THROWS_WITH_AS(a.buffer(), doctest::Contains("null Array"), ValueError);
  std::ostringstream os;
  os << a;
  CHECK(os.str() == "Array(null)");
}

TEST_CASE("Array: prints as a jaxpr aval with leading values") {
  std::ostringstream os;
  os << Array::from_vector(std::vector<float>{0.5f, 1.0f}, Shape{1, 2});
  CHECK(os.str() == "f32[1,2]{0.5, 1}");
}

TEST_CASE("Array: bf16/f16 arrays are filled on the host; their values are read as float32") {
  const Array b = Array::full(Shape{3}, 0.1, DType::bf16);
  CHECK(b.aval() == AVal{Shape{3}, DType::bf16});
  CHECK(b.nbytes() == 6);
  CHECK(Array::full(Shape{}, 1.0, DType::f16).nbytes() == 2);
  CHECK_THROWS_WITH_AS(b.to_vector<float>(), doctest::Contains("bfloat16"), ValueError);
}
