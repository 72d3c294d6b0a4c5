// jax.random.gumbel and jax.random.categorical (flaxpp/ops/sampling.hpp).
#include "flaxpp/ops/sampling.hpp"

#include <limits>

#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/random/distributions.hpp"

namespace flaxpp::random {

Array gumbel(const Key& key, const Shape& shape, DType dtype, Device device) {
  double tiny = 0;
  if (dtype == DType::f32)
    tiny = std::numeric_limits<float>::min();
  else if (dtype == DType::f64)
    tiny = std::numeric_limits<double>::min();
  else
    throw ValueError(
        detail::str("gumbel: dtype must be float32 or float64, got ", dtype_name(dtype)));
  const Array u = uniform(key, shape, dtype, tiny, 1.0).to(device);
  return -log(-log(u));
}

Array categorical(const Key& key, const Array& logits, std::int64_t axis,
                  std::optional<Shape> shape) {
  const std::size_t a = logits.shape().normalize_axis(axis);
  std::vector<std::int64_t> batch = logits.shape().dims();
  batch.erase(batch.begin() + static_cast<std::ptrdiff_t>(a));
  const std::vector<std::int64_t> dims = shape ? shape->dims() : batch;
  if (dims.size() < batch.size() ||
      !std::equal(batch.begin(), batch.end(),
                  dims.end() - static_cast<std::ptrdiff_t>(batch.size())))
    throw ValueError(detail::str("categorical: shape ", Shape(dims),
                                 " must end with the logits' shape without axis ", axis, ", ",
                                 Shape(batch), " (logits ", logits.aval(), ")"));
  // JAX's _categorical: noise of (prefix..., logits' shape), the logits broadcast over the
  // prefix, argmax along the axis counted from the end.
  const std::size_t prefix = dims.size() - batch.size();
  std::vector<std::int64_t> noise(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(prefix));
  noise.insert(noise.end(), logits.shape().dims().begin(), logits.shape().dims().end());
  // Traced logits have no device yet: their noise is a host constant of the trace.
  const Device device = logits.is_traced() ? Device::cpu() : logits.device();
  const Array g = gumbel(key, Shape(noise), logits.dtype(), device);
  const auto from_end = static_cast<std::int64_t>(a) - logits.rank();
  return argmax(g + logits, from_end);
}

}  // namespace flaxpp::random
