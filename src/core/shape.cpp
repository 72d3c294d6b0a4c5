// Shape validation, axis normalisation and printing.
#include "flaxpp/core/shape.hpp"

#include <limits>

#include "flaxpp/core/error.hpp"

namespace flaxpp {

Shape::Shape(std::initializer_list<std::int64_t> dims) : Shape(std::vector<std::int64_t>(dims)) {}

Shape::Shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {
  for (std::int64_t d : dims_) {
    if (d < 0) throw ValueError(detail::str("Shape ", str(), ": dimensions must be >= 0, got ", d));
    if (d != 0 && size_ > std::numeric_limits<std::int64_t>::max() / d)
      throw ValueError(detail::str("Shape ", str(), ": element count overflows int64"));
    size_ *= d;
  }
}

std::size_t Shape::normalize_axis(std::int64_t axis) const {
  const std::int64_t r = rank();
  if (axis < -r || axis >= r)
    throw ValueError(detail::str("axis ", axis, " is out of range for shape ", str(), " (rank ", r,
                                 "); expected an axis in [", -r, ", ", r, ")"));
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

std::string Shape::str() const {
  std::string out = "[";
  for (std::size_t i = 0; i < dims_.size(); ++i)
    out += detail::str(i ? "," : "", dims_[i]);
  return out + "]";
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) {
  return os << shape.str();
}

}  // namespace flaxpp
