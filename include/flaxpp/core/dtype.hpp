// flaxpp/core/dtype.hpp — element types, their sizes and names (numpy's long names such as
// "float32" in files, jaxpr's short names such as "f32" in printed graphs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace flaxpp {

enum class DType : std::uint8_t { f32, f64, bf16, f16, i32, u32, bool_ };

// Bytes per element.
std::size_t itemsize(DType dtype);
// numpy name: "float32", "float64", "bfloat16", "float16", "int32", "uint32", "bool".
std::string_view dtype_name(DType dtype);
// jaxpr short name: "f32", "f64", "bf16", "f16", "i32", "u32", "bool".
std::string_view dtype_short_name(DType dtype);
// Parses a numpy name; throws ValueError listing the accepted names otherwise.
DType dtype_from_name(std::string_view name);

bool is_floating(DType dtype);
// bfloat16 or float16.
bool is_half(DType dtype);
bool is_integer(DType dtype);

// One value per dtype, looked up by DType: a table in place of a switch (a library's type code
// for each dtype, a file format's name), given in DType's order.
template <class T>
class PerDType {
 public:
  constexpr PerDType(T f32, T f64, T bf16, T f16, T i32, T u32, T bool_)
      : values_{f32, f64, bf16, f16, i32, u32, bool_} {}
  constexpr const T& operator[](DType dtype) const {
    return values_[static_cast<std::size_t>(dtype)];
  }

 private:
  T values_[7];
};

// A double rounded to float32 to nearest-even, overflowing to ±inf, as IEEE 754, numpy and
// JAX's conversions do (a plain cast of an out-of-range double is undefined in C++).
float round_to_float32(double value);
// The bits of a double as bfloat16 and float16, rounded to nearest-even (overflowing to ±inf,
// NaN kept quiet), as JAX converts a Python scalar: bfloat16 through float32 (ml_dtypes),
// float16 directly (numpy). Arrays of these dtypes are filled on the host with them.
std::uint16_t round_to_bfloat16_bits(double value);
std::uint16_t round_to_float16_bits(double value);
// The value of bfloat16 and float16 bits as a double, exactly (every such value is one).
double bfloat16_bits_to_double(std::uint16_t bits);
double float16_bits_to_double(std::uint16_t bits);

// The DType of a C++ element type that arrays may hold directly on the host.
template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct DTypeOf<std::uint32_t> {
  static constexpr DType value = DType::u32;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::bool_;
};
template <class T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

// Host storage type of a dtype, for dtypes arrays can be read as directly. bool is stored as
// one byte per element (numpy's layout), so its storage type is std::uint8_t.
template <class T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<Storage>{}) for the host storage type of `dtype`; throws ValueError for
// dtypes that have no host storage type yet (bf16, f16), naming `what`.
template <class F>
decltype(auto) visit_host_dtype(DType dtype, const char* what, F&& f);

namespace detail {
[[noreturn]] void throw_no_host_type(DType dtype, const char* what);
}

template <class F>
decltype(auto) visit_host_dtype(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(TypeTag<float>{});
    case DType::f64:
      return f(TypeTag<double>{});
    case DType::i32:
      return f(TypeTag<std::int32_t>{});
    case DType::u32:
      return f(TypeTag<std::uint32_t>{});
    case DType::bool_:
      return f(TypeTag<std::uint8_t>{});
    case DType::bf16:
    case DType::f16:
      break;
  }
  detail::throw_no_host_type(dtype, what);
}

}  // namespace flaxpp
