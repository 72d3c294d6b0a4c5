// flaxpp/ops/numpy.hpp — the jax.numpy-style API on Arrays: numpy broadcasting, scalar
// operands that take the array's dtype (JAX's weak types), reductions with axes and keepdims,
// matmul. Built from the lax primitives, so it runs eagerly and traced alike.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "flaxpp/core/array.hpp"

namespace flaxpp {

using Axes = std::vector<std::int64_t>;

// numpy broadcasting of two shapes; throws ValueError naming both when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b);
Array broadcast_to(const Array& x, const Shape& shape);

// Elementwise with broadcasting. Operands of different dtypes are an error unless one is 0-d
// (a scalar takes the other's dtype).
Array add(const Array& x, const Array& y);
Array subtract(const Array& x, const Array& y);
Array multiply(const Array& x, const Array& y);
Array divide(const Array& x, const Array& y);
Array maximum(const Array& x, const Array& y);
Array minimum(const Array& x, const Array& y);
Array where(const Array& condition, const Array& x, const Array& y);
Array greater(const Array& x, const Array& y);
Array greater_equal(const Array& x, const Array& y);
Array less(const Array& x, const Array& y);
Array equal(const Array& x, const Array& y);

Array operator+(const Array& x, const Array& y);
Array operator-(const Array& x, const Array& y);
Array operator*(const Array& x, const Array& y);
Array operator/(const Array& x, const Array& y);
Array operator-(const Array& x);
// A double operand becomes a 0-d array of the other operand's dtype.
Array operator+(const Array& x, double y);
Array operator+(double x, const Array& y);
Array operator-(const Array& x, double y);
Array operator-(double x, const Array& y);
Array operator*(const Array& x, double y);
Array operator*(double x, const Array& y);
Array operator/(const Array& x, double y);
Array operator/(double x, const Array& y);

Array exp(const Array& x);
Array log(const Array& x);
Array log1p(const Array& x);
Array tanh(const Array& x);
Array sqrt(const Array& x);
Array abs(const Array& x);
Array square(const Array& x);  // x ** 2 (integer_pow)
Array power(const Array& x, std::int64_t y);
// x**y for floating operands (lax.pow), with broadcasting.
Array power(const Array& x, const Array& y);
Array cos(const Array& x);
Array sin(const Array& x);

// Reductions over `axes` (all axes when absent; negative axes count from the end).
Array sum(const Array& x, std::optional<Axes> axes = std::nullopt, bool keepdims = false);
Array mean(const Array& x, std::optional<Axes> axes = std::nullopt, bool keepdims = false);
Array max(const Array& x, std::optional<Axes> axes = std::nullopt, bool keepdims = false);

// jnp.argmax / jnp.argmin: int32 indices along `axis` (of the flattened array when absent),
// the first where elements tie, the first NaN where there is one. keepdims keeps the axis as
// size 1 (needs an axis).
Array argmax(const Array& x, std::optional<std::int64_t> axis = std::nullopt,
             bool keepdims = false);
Array argmin(const Array& x, std::optional<std::int64_t> axis = std::nullopt,
             bool keepdims = false);
// jnp.cumsum: running sums along `axis` (of the flattened array when absent).
Array cumsum(const Array& x, std::optional<std::int64_t> axis = std::nullopt);
// jnp.sort and jnp.argsort along `axis` (of the flattened array when absent), stable: equal
// elements keep their order; NaNs sort last, -0.0 equals 0.0. descending reverses the order of
// distinct elements only (equal ones still keep theirs), as JAX's does.
Array sort(const Array& x, std::optional<std::int64_t> axis = -1);
Array argsort(const Array& x, std::optional<std::int64_t> axis = -1, bool descending = false);
// jnp.clip(x, min, max): maximum(x, min), then minimum with max; either bound may be absent.
Array clip(const Array& x, std::optional<double> min, std::optional<double> max);
// jax.nn.one_hot(x, num_classes, dtype): x's integers compared with 0..num_classes-1 along a
// new last axis (an index outside that range gives a row of zeros).
Array one_hot(const Array& x, std::int64_t num_classes, DType dtype = DType::f32);

// jnp.matmul: 1-D and 2-D operands, N-D @ 2-D (leading lhs dims are free dims, as in
// jnp.matmul, so the dot has no batch dims), and N-D @ N-D with equal batch dims.
Array matmul(const Array& a, const Array& b);

// jnp.reshape (one dim may be -1) and jnp.transpose (reversed axes when absent).
Array reshape(const Array& x, std::vector<std::int64_t> shape);
Array transpose(const Array& x, std::optional<Axes> axes = std::nullopt);
Array astype(const Array& x, DType dtype);
// jnp.expand_dims: a new axis of size 1 at `axis` of the result (negative counts from its end).
Array expand_dims(const Array& x, std::int64_t axis);

Array zeros(const Shape& shape, DType dtype = DType::f32);
Array ones(const Shape& shape, DType dtype = DType::f32);

}  // namespace flaxpp
