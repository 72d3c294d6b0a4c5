// flaxpp/ir/params.hpp — the parameters of one equation (JAX's eqn.params): named values of
// a few kinds, printed as in a jaxpr. Policies see them (e.g. dot_general's
// dimension_numbers), so the names follow jax.lax.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "flaxpp/core/dtype.hpp"
#include "flaxpp/core/error.hpp"

namespace flaxpp::ir {

class Graph;
class Policy;
struct ElementwiseProgram;

// dot_general's ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)).
struct DotDimensionNumbers {
  std::vector<std::int64_t> lhs_contracting, rhs_contracting, lhs_batch, rhs_batch;
  bool operator==(const DotDimensionNumbers&) const = default;
};

using ParamValue =
    std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>, DType,
                 DotDimensionNumbers, std::shared_ptr<const Graph>, std::shared_ptr<const Policy>,
                 std::shared_ptr<const ElementwiseProgram>>;

class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::pair<std::string, ParamValue>> items);

  bool has(std::string_view name) const;
  // The parameter `name` as T; a missing parameter or another kind is a bug in flaxpp.
  template <class T>
  const T& get(std::string_view name) const;
  void set(std::string name, ParamValue value);
  const std::vector<std::pair<std::string, ParamValue>>& items() const { return items_; }
  // "dimension_numbers=(([1], [0]), ([], [])) precision=None" style, sorted by name.
  std::string str() const;

  bool operator==(const Params& other) const;

 private:
  const ParamValue& find(std::string_view name) const;
  std::vector<std::pair<std::string, ParamValue>> items_;  // sorted by name
};

template <class T>
const T& Params::get(std::string_view name) const {
  const ParamValue& v = find(name);
  FLAXPP_ASSERT(std::holds_alternative<T>(v), "parameter ", name, " has another kind");
  return std::get<T>(v);
}

}  // namespace flaxpp::ir
