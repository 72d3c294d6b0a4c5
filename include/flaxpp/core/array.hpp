// flaxpp/core/array.hpp — Array: an immutable value made of a buffer handle, a shape and a
// dtype. Copies share the buffer, and a buffer is never written while two Arrays hold it (only
// a donated operand held by nothing else may take a primitive's result in place). While a
// function is traced (grad, vjp, checkpoint), an Array may instead hold a tracer: it then has
// a shape and dtype but no values, and reading values is a TracerError.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <span>
#include <type_traits>
#include <vector>

#include "flaxpp/core/aval.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/core/dtype.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/core/shape.hpp"
#include "flaxpp/core/tracer.hpp"

namespace flaxpp {

// Values of a traced array were asked for (e.g. printing or to_vector() inside grad).
class TracerError : public Error {
 public:
  using Error::Error;
};

class Array {
 public:
  // A null array (no buffer); only assignable and testable with valid().
  Array() = default;
  // Wraps a buffer holding shape.size() elements of dtype (the buffer may be larger).
  Array(std::shared_ptr<const Buffer> buffer, Shape shape, DType dtype);
  // A traced value of the given abstract value.
  static Array traced(std::shared_ptr<Tracer> tracer, AVal aval);

  // Creation copies host data into a new array on `device`: by default the default device,
  // as jnp.array does (default_device(): the GPU when one is present).
  // from_host_bytes: host data laid out row-major, shape.size() elements of dtype.
  static Array from_host_bytes(const void* data, Shape shape, DType dtype, Device device);
  template <class T>
  static Array from_vector(std::span<const T> data, Shape shape, Device device = default_device());
  template <class T>
  static Array from_vector(const std::vector<T>& data, Shape shape,
                           Device device = default_device()) {
    if constexpr (std::is_same_v<T, bool>) {
      // std::vector<bool> is packed and has no span view.
      const std::vector<std::uint8_t> bytes(data.begin(), data.end());
      check_count(bytes.size(), shape);
      return from_host_bytes(bytes.data(), std::move(shape), DType::bool_, device);
    } else {
      return from_vector(std::span<const T>(data), std::move(shape), device);
    }
  }
  template <class T>
  static Array scalar(T value, Device device = default_device()) {
    return from_vector(std::span<const T>(&value, 1), Shape{}, device);
  }
  // shape.size() copies of `value` converted to dtype.
  static Array full(Shape shape, double value, DType dtype, Device device = default_device());

  bool valid() const { return buffer_ != nullptr || tracer_ != nullptr; }
  bool is_traced() const { return tracer_ != nullptr; }
  // The tracer of a traced array (nullptr for a concrete one).
  Tracer* tracer() const { return tracer_.get(); }
  const std::shared_ptr<Tracer>& tracer_ptr() const { return tracer_; }
  AVal aval() const { return {shape_, dtype_}; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const;
  std::int64_t rank() const { return shape_.rank(); }
  std::int64_t size() const { return shape_.size(); }
  std::int64_t nbytes() const { return size() * static_cast<std::int64_t>(itemsize(dtype_)); }
  const Buffer& buffer() const;
  // True when no other Array shares this one's buffer: the only owner has given it up to a
  // primitive that may then write its result there (fused_elementwise's "donate"). Never for
  // a view into another array's memory (Backend::view).
  bool buffer_unshared() const {
    return buffer_ != nullptr && buffer_.use_count() == 1 && !buffer_->is_view();
  }
  // Row `i` of the leading axis reading this array's memory in place (Backend::view): no
  // allocation, no copy; this array's buffer stays alive while the row does.
  Array row_view(std::int64_t i) const;
  // True once the array was donated to a jitted function (reading it then throws).
  bool donated() const;

  // The same values on another device (the same array when already there).
  Array to(Device device) const;
  // A new buffer on the same device holding the same elements (jnp.copy), queued after the
  // work that writes this array.
  Array copy() const;
  // The values copied to host memory; T must match dtype() exactly.
  template <class T>
  std::vector<T> to_vector() const;
  // The value of an array with exactly one element, of any shape (a loss, a step count), as
  // jax.Array.item() gives it; T must match dtype() exactly, as for to_vector(). Throws
  // ValueError naming the shape for an array of any other size.
  template <class T>
  T item() const;
  // Direct read access to a host array's elements; throws for device arrays or a dtype
  // mismatch (use to_vector() for those).
  template <class T>
  std::span<const T> host_span() const;

 private:
  static void check_count(std::size_t values, const Shape& shape);
  void check_element_type(DType requested) const;
  void copy_to_host_bytes(void* dst) const;

  std::shared_ptr<const Buffer> buffer_;
  std::shared_ptr<Tracer> tracer_;
  Shape shape_;
  DType dtype_ = DType::f32;
};

// "f32[2,3]" (jaxpr aval style) followed by up to 8 leading values.
std::ostream& operator<<(std::ostream& os, const Array& array);

template <class T>
Array Array::from_vector(std::span<const T> data, Shape shape, Device device) {
  check_count(data.size(), shape);
  if constexpr (std::is_same_v<T, bool>) {
    // std::vector<bool> is packed; store one byte per element like numpy's bool.
    std::vector<std::uint8_t> bytes(data.begin(), data.end());
    return from_host_bytes(bytes.data(), std::move(shape), DType::bool_, device);
  } else {
    return from_host_bytes(data.data(), std::move(shape), dtype_of<T>, device);
  }
}

template <class T>
std::vector<T> Array::to_vector() const {
  check_element_type(dtype_of<T>);
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size()));
    copy_to_host_bytes(bytes.data());
    return std::vector<bool>(bytes.begin(), bytes.end());
  } else {
    std::vector<T> out(static_cast<std::size_t>(size()));
    copy_to_host_bytes(out.data());
    return out;
  }
}

template <class T>
T Array::item() const {
  if (size() != 1)
    throw ValueError(detail::str("Array::item: expected an array with exactly one element, got ",
                                 aval(), " (", size(),
                                 " elements); index or reduce it first, e.g. sum() or mean()"));
  return to_vector<T>()[0];
}

template <class T>
std::span<const T> Array::host_span() const {
  static_assert(!std::is_same_v<T, bool>, "read bool arrays with host_span<std::uint8_t>()");
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    check_element_type(DType::bool_);
  } else {
    check_element_type(dtype_of<T>);
  }
  if (device().kind != DeviceKind::cpu)
    throw ValueError(detail::str("Array::host_span: the array lives on ", device(),
                                 "; copy it with to(Device::cpu()) or to_vector() first"));
  return {static_cast<const T*>(buffer().data()), static_cast<std::size_t>(size())};
}

}  // namespace flaxpp
