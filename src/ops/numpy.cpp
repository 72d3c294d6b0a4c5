// jax.numpy-style operations: broadcasting, weak scalars, reductions, matmul.
#include "flaxpp/ops/numpy.hpp"

#include <algorithm>
#include <numeric>

#include "flaxpp/ir/lax.hpp"

namespace flaxpp {
namespace {

// Normalised, sorted axes of `x` (all axes when absent).
Axes reduction_axes(const Array& x, const std::optional<Axes>& axes) {
  Axes out;
  if (!axes) {
    out.resize(static_cast<std::size_t>(x.rank()));
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  for (std::int64_t a : *axes)
    out.push_back(static_cast<std::int64_t>(x.shape().normalize_axis(a)));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw ValueError(detail::str("repeated axis in reduction over ", x.aval()));
  return out;
}

// Reinserts reduced axes as size 1 (keepdims=True).
Array keep_dims(const Array& reduced, const Array& x, const Axes& axes) {
  std::vector<std::int64_t> dims = x.shape().dims();
  for (std::int64_t a : axes)
    dims[static_cast<std::size_t>(a)] = 1;
  return lax::reshape(reduced, Shape(dims));
}

// Brings two operands to one dtype (a 0-d operand takes the other's) and a common shape.
std::pair<Array, Array> promote(const char* op, const Array& x, const Array& y) {
  Array a = x, b = y;
  if (a.dtype() != b.dtype()) {
    if (b.rank() == 0) {
      b = lax::convert_element_type(b, a.dtype());
    } else if (a.rank() == 0) {
      a = lax::convert_element_type(a, b.dtype());
    } else {
      throw ValueError(detail::str(op, ": operands have dtypes ", dtype_name(a.dtype()), " and ",
                                   dtype_name(b.dtype()), "; convert one with astype() first"));
    }
  }
  if (a.shape() == b.shape() || a.rank() == 0 || b.rank() == 0) return {a, b};
  const Shape s = broadcast_shapes(a.shape(), b.shape());
  return {broadcast_to(a, s), broadcast_to(b, s)};
}

template <class F>
Array binary(const char* op, const Array& x, const Array& y, F f) {
  auto [a, b] = promote(op, x, y);
  return f(a, b);
}

Array weak(double v, const Array& like) {
  return lax::scalar(v, like.dtype());
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const std::int64_t rank = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> dims(static_cast<std::size_t>(rank));
  for (std::int64_t i = 0; i < rank; ++i) {
    const std::int64_t da =
        i < rank - a.rank() ? 1 : a.dims()[static_cast<std::size_t>(i - (rank - a.rank()))];
    const std::int64_t db =
        i < rank - b.rank() ? 1 : b.dims()[static_cast<std::size_t>(i - (rank - b.rank()))];
    if (da != db && da != 1 && db != 1)
      throw ValueError(detail::str("shapes ", a, " and ", b, " cannot be broadcast together (axis ",
                                   i, ": ", da, " vs ", db, ")"));
    dims[static_cast<std::size_t>(i)] = da == 1 ? db : da;
  }
  return Shape(dims);
}

Array broadcast_to(const Array& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  if (broadcast_shapes(x.shape(), shape) != shape)
    throw ValueError(detail::str("cannot broadcast ", x.aval(), " to shape ", shape));
  Axes dims(static_cast<std::size_t>(x.rank()));
  std::iota(dims.begin(), dims.end(), shape.rank() - x.rank());
  return lax::broadcast_in_dim(x, shape, dims);
}

// jax.numpy's broadcasting binary functions, each with the lax primitive it applies.
#define FLAXPP_NUMPY_BINARY(name, primitive)    \
  Array name(const Array& x, const Array& y) {  \
    return binary(#name, x, y, lax::primitive); \
  }
FLAXPP_NUMPY_BINARY(add, add)
FLAXPP_NUMPY_BINARY(subtract, sub)
FLAXPP_NUMPY_BINARY(multiply, mul)
FLAXPP_NUMPY_BINARY(divide, div)
FLAXPP_NUMPY_BINARY(maximum, max)
FLAXPP_NUMPY_BINARY(minimum, min)
FLAXPP_NUMPY_BINARY(greater, gt)
FLAXPP_NUMPY_BINARY(greater_equal, ge)
FLAXPP_NUMPY_BINARY(less, lt)
FLAXPP_NUMPY_BINARY(equal, eq)
FLAXPP_NUMPY_BINARY(power, pow)
#undef FLAXPP_NUMPY_BINARY

Array where(const Array& condition, const Array& x, const Array& y) {
  if (condition.dtype() != DType::bool_)
    throw ValueError(detail::str("where: the condition must be bool, got ", condition.aval()));
  auto [a, b] = promote("where", x, y);
  const Shape s = broadcast_shapes(broadcast_shapes(condition.shape(), a.shape()), b.shape());
  const Array c = condition.rank() == 0 ? condition : broadcast_to(condition, s);
  return lax::select(c, broadcast_to(a, s), broadcast_to(b, s));
}

Array operator+(const Array& x, const Array& y) {
  return add(x, y);
}
Array operator-(const Array& x, const Array& y) {
  return subtract(x, y);
}
Array operator*(const Array& x, const Array& y) {
  return multiply(x, y);
}
Array operator/(const Array& x, const Array& y) {
  return divide(x, y);
}
Array operator-(const Array& x) {
  return lax::neg(x);
}
// A double operand becomes a 0-d array of the other's dtype.
#define FLAXPP_SCALAR_OPERATOR(op, primitive)   \
  Array operator op(const Array& x, double y) { \
    return lax::primitive(x, weak(y, x));       \
  }                                             \
  Array operator op(double x, const Array& y) { \
    return lax::primitive(weak(x, y), y);       \
  }
FLAXPP_SCALAR_OPERATOR(+, add)
FLAXPP_SCALAR_OPERATOR(-, sub)
FLAXPP_SCALAR_OPERATOR(*, mul)
FLAXPP_SCALAR_OPERATOR(/, div)
#undef FLAXPP_SCALAR_OPERATOR

// The unary functions are the lax primitives of the same name.
#define FLAXPP_NUMPY_UNARY(name) \
  Array name(const Array& x) {   \
    return lax::name(x);         \
  }
FLAXPP_NUMPY_UNARY(exp)
FLAXPP_NUMPY_UNARY(log)
FLAXPP_NUMPY_UNARY(log1p)
FLAXPP_NUMPY_UNARY(tanh)
FLAXPP_NUMPY_UNARY(sqrt)
FLAXPP_NUMPY_UNARY(abs)
FLAXPP_NUMPY_UNARY(cos)
FLAXPP_NUMPY_UNARY(sin)
#undef FLAXPP_NUMPY_UNARY

Array square(const Array& x) {
  return lax::integer_pow(x, 2);
}
Array power(const Array& x, std::int64_t y) {
  return lax::integer_pow(x, y);
}

Array sum(const Array& x, std::optional<Axes> axes, bool keepdims) {
  const Axes a = reduction_axes(x, axes);
  const Array r = lax::reduce_sum(x, a);
  return keepdims ? keep_dims(r, x, a) : r;
}

Array mean(const Array& x, std::optional<Axes> axes, bool keepdims) {
  const Axes a = reduction_axes(x, axes);
  double count = 1;
  for (std::int64_t axis : a)
    count *= static_cast<double>(x.shape().dims()[static_cast<std::size_t>(axis)]);
  return lax::div(sum(x, a, keepdims), weak(count, x));
}

Array max(const Array& x, std::optional<Axes> axes, bool keepdims) {
  const Axes a = reduction_axes(x, axes);
  const Array r = lax::reduce_max(x, a);
  return keepdims ? keep_dims(r, x, a) : r;
}

namespace {

// x and the axis an argmax, argmin, cumsum or sort runs along: x flattened when `axis` is absent.
std::pair<Array, std::int64_t> along(const Array& x, std::optional<std::int64_t> axis) {
  if (!axis) return {lax::reshape(x, Shape{x.size()}), 0};
  return {x, static_cast<std::int64_t>(x.shape().normalize_axis(*axis))};
}

Array arg_reduce(Array (*reduce)(const Array&, std::int64_t, DType), const char* name,
                 const Array& x, std::optional<std::int64_t> axis, bool keepdims) {
  if (keepdims && !axis)
    throw ValueError(detail::str(name, ": keepdims needs an axis (", x.aval(), ")"));
  const auto [operand, a] = along(x, axis);
  const Array r = reduce(operand, a, DType::i32);
  return keepdims ? keep_dims(r, x, Axes{a}) : r;
}

}  // namespace

Array argmax(const Array& x, std::optional<std::int64_t> axis, bool keepdims) {
  return arg_reduce(lax::argmax, "argmax", x, axis, keepdims);
}
Array argmin(const Array& x, std::optional<std::int64_t> axis, bool keepdims) {
  return arg_reduce(lax::argmin, "argmin", x, axis, keepdims);
}

Array cumsum(const Array& x, std::optional<std::int64_t> axis) {
  const auto [operand, a] = along(x, axis);
  return lax::cumsum(operand, a);
}

Array sort(const Array& x, std::optional<std::int64_t> axis) {
  const auto [operand, a] = along(x, axis);
  return lax::sort(operand, a);
}

Array argsort(const Array& x, std::optional<std::int64_t> axis, bool descending) {
  const auto [operand, a] = along(x, axis);
  return lax::argsort(operand, a, descending);
}

Array clip(const Array& x, std::optional<double> min, std::optional<double> max) {
  Array y = x;
  if (min) y = maximum(weak(*min, y), y);
  if (max) y = minimum(weak(*max, y), y);
  return y;
}

Array one_hot(const Array& x, std::int64_t num_classes, DType dtype) {
  if (x.dtype() != DType::i32 && x.dtype() != DType::u32)
    throw ValueError(detail::str("one_hot: expected integer classes, got ", x.aval()));
  std::vector<std::int64_t> dims = x.shape().dims();
  dims.push_back(num_classes);
  const Shape shape(dims);
  Axes kept(static_cast<std::size_t>(x.rank()));
  std::iota(kept.begin(), kept.end(), 0);
  const Array classes = lax::iota(x.dtype(), shape, x.rank());
  return astype(lax::eq(lax::broadcast_in_dim(x, shape, kept), classes), dtype);
}

Array matmul(const Array& a, const Array& b) {
  if (a.rank() == 0 || b.rank() == 0)
    throw ValueError(
        detail::str("matmul: operands must be at least 1-D, got ", a.aval(), " and ", b.aval()));
  const std::int64_t ca = a.rank() - 1;                      // lhs contracting axis
  const std::int64_t cb = b.rank() == 1 ? 0 : b.rank() - 2;  // rhs contracting axis
  if (a.shape().dims().back() != b.shape().dims()[static_cast<std::size_t>(cb)])
    throw ValueError(
        detail::str("matmul: contracting dimensions differ: ", a.aval(), " @ ", b.aval()));
  if (b.rank() <= 2) return lax::dot_general(a, b, {{ca}, {cb}, {}, {}});
  // Equal batch dims on both sides.
  if (a.rank() != b.rank())
    throw ValueError(detail::str("matmul: batched operands need the same rank here, got ", a.aval(),
                                 " and ", b.aval()));
  Axes batch(static_cast<std::size_t>(a.rank() - 2));
  std::iota(batch.begin(), batch.end(), 0);
  for (std::int64_t i : batch)
    if (a.shape().dims()[static_cast<std::size_t>(i)] !=
        b.shape().dims()[static_cast<std::size_t>(i)])
      throw ValueError(detail::str("matmul: batch dimensions differ: ", a.aval(), " @ ", b.aval()));
  return lax::dot_general(a, b, {{ca}, {cb}, batch, batch});
}

Array reshape(const Array& x, std::vector<std::int64_t> shape) {
  std::int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw ValueError("reshape: only one dimension may be -1");
      infer = static_cast<std::int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.size() % known != 0)
      throw ValueError(detail::str("reshape: cannot infer the -1 dimension reshaping ", x.aval()));
    shape[static_cast<std::size_t>(infer)] = x.size() / known;
  }
  const Shape s(shape);
  return s == x.shape() ? x : lax::reshape(x, s);
}

Array transpose(const Array& x, std::optional<Axes> axes) {
  Axes perm;
  if (axes) {
    for (std::int64_t a : *axes)
      perm.push_back(static_cast<std::int64_t>(x.shape().normalize_axis(a)));
  } else {
    for (std::int64_t i = x.rank() - 1; i >= 0; --i)
      perm.push_back(i);
  }
  return lax::transpose(x, perm);
}

Array astype(const Array& x, DType dtype) {
  return lax::convert_element_type(x, dtype);
}

Array expand_dims(const Array& x, std::int64_t axis) {
  const std::int64_t rank = x.rank() + 1;
  const std::int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw ValueError(detail::str("expand_dims: axis ", axis,
                                 " is out of range for a result of rank ", rank, " (from ",
                                 x.aval(), "); use an axis in [", -rank, ", ", rank, ")"));
  // As lax.expand_dims: a broadcast_in_dim that maps the operand's axes around the new one.
  std::vector<std::int64_t> dims = x.shape().dims(), bdims;
  dims.insert(dims.begin() + a, 1);
  for (std::int64_t i = 0; i < rank; ++i)
    if (i != a) bdims.push_back(i);
  return lax::broadcast_in_dim(x, Shape(dims), bdims);
}

Array zeros(const Shape& shape, DType dtype) {
  return Array::full(shape, 0.0, dtype);
}
Array ones(const Shape& shape, DType dtype) {
  return Array::full(shape, 1.0, dtype);
}

}  // namespace flaxpp
