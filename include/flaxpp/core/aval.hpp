// flaxpp/core/aval.hpp — AVal: an abstract value (shape + dtype, no data), what a traced
// array is known to be and what shape rules compute. Prints like a jaxpr aval: f32[5,4].
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "flaxpp/core/dtype.hpp"
#include "flaxpp/core/shape.hpp"

namespace flaxpp {

struct AVal {
  Shape shape;
  DType dtype = DType::f32;

  bool operator==(const AVal&) const = default;
  // The bytes an array of it holds.
  std::int64_t nbytes() const { return shape.size() * static_cast<std::int64_t>(itemsize(dtype)); }
  std::string str() const { return std::string(dtype_short_name(dtype)) + shape.str(); }
};

inline std::ostream& operator<<(std::ostream& os, const AVal& a) {
  return os << a.str();
}

}  // namespace flaxpp
