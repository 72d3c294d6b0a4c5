// flaxpp/core/shape.hpp — an array's dimensions. Rank 0 is a scalar (size 1); dimensions
// are non-negative; the element count must fit in int64.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

namespace flaxpp {

class Shape {
 public:
  Shape() = default;  // a scalar
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(std::vector<std::int64_t> dims);

  std::int64_t rank() const { return static_cast<std::int64_t>(dims_.size()); }
  // Number of elements (1 for a scalar, 0 if any dimension is 0).
  std::int64_t size() const { return size_; }
  const std::vector<std::int64_t>& dims() const { return dims_; }
  // Dimension `axis`; negative axes count from the end as in numpy.
  std::int64_t operator[](std::int64_t axis) const { return dims_[normalize_axis(axis)]; }
  // Maps a possibly negative axis into [0, rank); throws ValueError when out of range.
  std::size_t normalize_axis(std::int64_t axis) const;

  bool operator==(const Shape& other) const { return dims_ == other.dims_; }
  // "[5,4]"; "[]" for a scalar (the bracketed form of jaxpr avals).
  std::string str() const;

 private:
  std::vector<std::int64_t> dims_;
  std::int64_t size_ = 1;
};

std::ostream& operator<<(std::ostream& os, const Shape& shape);

}  // namespace flaxpp
