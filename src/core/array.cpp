// Array construction, transfer between devices and host read-back.
#include "flaxpp/core/array.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>

namespace flaxpp {

Array::Array(std::shared_ptr<const Buffer> buffer, Shape shape, DType dtype)
    : buffer_(std::move(buffer)), shape_(std::move(shape)), dtype_(dtype) {
  if (!buffer_) throw ValueError("Array: null buffer");
  if (buffer_->bytes() < nbytes())
    throw ValueError(detail::str("Array: a ", dtype_name(dtype_), shape_, " array needs ", nbytes(),
                                 " bytes, the buffer has ", buffer_->bytes()));
}

Array Array::traced(std::shared_ptr<Tracer> tracer, AVal aval) {
  FLAXPP_ASSERT(tracer != nullptr);
  Array a;
  a.tracer_ = std::move(tracer);
  a.shape_ = std::move(aval.shape);
  a.dtype_ = aval.dtype;
  return a;
}

Array Array::from_host_bytes(const void* data, Shape shape, DType dtype, Device device) {
  const auto bytes = shape.size() * static_cast<std::int64_t>(itemsize(dtype));
  Backend& be = backend(device);
  std::shared_ptr<Buffer> buffer = be.allocate(bytes);
  be.copy_from_host(data, *buffer, bytes);
  return Array(std::move(buffer), std::move(shape), dtype);
}

Array Array::full(Shape shape, double value, DType dtype, Device device) {
  // The value's bits are made here, then the backend fills the buffer with them (a kernel on
  // a GPU): no host array of the full size, no upload.
  std::uint64_t bits = 0;  // the element's bytes, in its first itemsize(dtype) bytes
  if (dtype == DType::bf16 || dtype == DType::f16) {
    // No host arithmetic on 16-bit floats, but their bits can be made here (weak-typed
    // scalars of bf16 computations, zeros of bf16 optimiser state).
    const std::uint16_t b =
        dtype == DType::bf16 ? round_to_bfloat16_bits(value) : round_to_float16_bits(value);
    std::memcpy(&bits, &b, sizeof b);
  } else {
    visit_host_dtype(dtype, "Array::full", [&]<class T>(TypeTag<T>) {
      T v{};
      if constexpr (std::is_same_v<T, std::uint8_t>) {
        v = value != 0.0;
      } else if constexpr (std::is_same_v<T, float>) {
        v = round_to_float32(value);
      } else if constexpr (std::is_integral_v<T>) {
        if (!(value >= static_cast<double>(std::numeric_limits<T>::min()) &&
              value <= static_cast<double>(std::numeric_limits<T>::max())))
          throw ValueError(
              detail::str("Array::full: ", value, " does not fit in ", dtype_name(dtype)));
        v = static_cast<T>(value);
      } else {
        v = static_cast<T>(value);
      }
      std::memcpy(&bits, &v, sizeof v);
    });
  }
  const std::int64_t count = shape.size();
  Backend& be = backend(device);
  std::shared_ptr<Buffer> buffer = be.allocate(count * static_cast<std::int64_t>(itemsize(dtype)));
  be.fill(*buffer, &bits, itemsize(dtype), count);
  return Array(std::move(buffer), std::move(shape), dtype);
}

Device Array::device() const {
  return buffer().device();
}

bool Array::donated() const {
  return buffer_ != nullptr && buffer_->donated();
}

const Buffer& Array::buffer() const {
  if (tracer_)
    throw TracerError(detail::str(
        "the values of a traced array (", aval(),
        ") were asked for inside grad, vjp or checkpoint; "
        "traced functions must compute with flaxpp operations only. Read values outside the "
        "transformed function, or pass them in as non-differentiated inputs"));
  if (!buffer_) throw ValueError("use of a null Array (default-constructed, never assigned)");
  if (buffer_->donated())
    throw ValueError(detail::str(
        "an array (", aval(), ") was read after it was donated to a jitted function "
        "(JitOptions::donate_argnums): its memory now holds that call's results. Use the "
        "results instead, or do not donate that argument"));
  return *buffer_;
}

Array Array::to(Device target) const {
  if (device() == target) return *this;
  const std::int64_t bytes = nbytes();
  std::vector<std::byte> staging(static_cast<std::size_t>(bytes));
  copy_to_host_bytes(staging.data());
  return from_host_bytes(staging.data(), shape_, dtype_, target);
}

Array Array::row_view(std::int64_t i) const {
  const Buffer& b = buffer();  // a traced, null or donated array throws here
  if (rank() == 0 || i < 0 || i >= shape_[0])
    throw ValueError(detail::str("Array::row_view: no row ", i, " in an array of shape ", shape_));
  const std::int64_t row_bytes = nbytes() / shape_[0];
  const Shape row(std::vector<std::int64_t>(shape_.dims().begin() + 1, shape_.dims().end()));
  return Array(b.backend().view(buffer_, i * row_bytes, row_bytes), row, dtype_);
}

Array Array::copy() const {
  Backend& be = buffer().backend();
  std::shared_ptr<Buffer> out = be.allocate(nbytes());
  be.copy(buffer(), *out, nbytes());
  return Array(std::move(out), shape_, dtype_);
}

void Array::check_count(std::size_t values, const Shape& shape) {
  if (static_cast<std::int64_t>(values) != shape.size())
    throw ValueError(detail::str("Array::from_vector: shape ", shape, " needs ", shape.size(),
                                 " elements, got ", values, " values"));
}

void Array::check_element_type(DType requested) const {
  if (requested != dtype())
    throw ValueError(detail::str("array has dtype ", dtype_name(dtype()), ", read as ",
                                 dtype_name(requested),
                                 "; convert it first or read it with the "
                                 "matching element type"));
}

void Array::copy_to_host_bytes(void* dst) const {
  buffer().backend().copy_to_host(buffer(), dst, nbytes());
}

std::ostream& operator<<(std::ostream& os, const Array& a) {
  if (!a.valid()) return os << "Array(null)";
  if (a.is_traced()) return os << "Traced<" << a.aval() << ">";
  os << dtype_short_name(a.dtype()) << a.shape() << "{";
  const std::int64_t count = std::min<std::int64_t>(a.size(), 8);
  if (a.dtype() == DType::bf16 || a.dtype() == DType::f16) {
    os << "...";
  } else {
    const Array host = a.to(Device::cpu());
    visit_host_dtype(a.dtype(), "print", [&]<class T>(TypeTag<T>) {
      const std::span<const T> v = host.host_span<T>();
      for (std::int64_t i = 0; i < count; ++i)
        os << (i ? ", " : "") << +v[static_cast<std::size_t>(i)];
    });
  }
  if (a.size() > count) os << ", ...";
  os << "}";
  if (a.device().kind != DeviceKind::cpu) os << "@" << a.device();
  return os;
}

}  // namespace flaxpp
