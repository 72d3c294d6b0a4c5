// Params: sorted named parameters of an equation, printed as in a jaxpr.
#include "flaxpp/ir/params.hpp"

#include <algorithm>
#include <sstream>

#include "flaxpp/ir/elementwise_program.hpp"
#include "flaxpp/ir/graph.hpp"
#include "flaxpp/ir/policy.hpp"

namespace flaxpp::ir {
namespace {

std::string list_str(const std::vector<std::int64_t>& v) {
  std::string out = "(";
  for (std::size_t i = 0; i < v.size(); ++i)
    out += detail::str(i ? ", " : "", v[i]);
  return out + (v.size() == 1 ? ",)" : ")");
}

struct ValueStr {
  std::string operator()(std::int64_t v) const { return std::to_string(v); }
  std::string operator()(double v) const { return detail::str(v); }
  std::string operator()(bool v) const { return v ? "True" : "False"; }
  std::string operator()(const std::string& v) const { return v; }
  std::string operator()(const std::vector<std::int64_t>& v) const { return list_str(v); }
  std::string operator()(DType v) const { return std::string(dtype_name(v)); }
  std::string operator()(const DotDimensionNumbers& d) const {
    return detail::str("((", list_str(d.lhs_contracting), ", ", list_str(d.rhs_contracting), "), (",
                       list_str(d.lhs_batch), ", ", list_str(d.rhs_batch), "))");
  }
  std::string operator()(const std::shared_ptr<const Graph>& g) const {
    return g ? g->str(2) : "None";
  }
  std::string operator()(const std::shared_ptr<const Policy>& p) const {
    return p ? p->str() : "None";
  }
  std::string operator()(const std::shared_ptr<const ElementwiseProgram>& p) const {
    return p ? p->str() : "None";
  }
};

}  // namespace

Params::Params(std::initializer_list<std::pair<std::string, ParamValue>> items) {
  for (const auto& [k, v] : items)
    set(k, v);
}

bool Params::has(std::string_view name) const {
  return std::any_of(items_.begin(), items_.end(),
                     [&](const auto& item) { return item.first == name; });
}

const ParamValue& Params::find(std::string_view name) const {
  for (const auto& item : items_)
    if (item.first == name) return item.second;
  FLAXPP_ASSERT(false, "missing parameter ", name);
  return items_.front().second;  // unreachable
}

void Params::set(std::string name, ParamValue value) {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& item, const std::string& n) { return item.first < n; });
  if (it != items_.end() && it->first == name) {
    it->second = std::move(value);
  } else {
    items_.emplace(it, std::move(name), std::move(value));
  }
}

std::string Params::str() const {
  std::string out;
  for (const auto& [k, v] : items_)
    out += detail::str(out.empty() ? "" : " ", k, "=", std::visit(ValueStr{}, v));
  return out;
}

bool Params::operator==(const Params& other) const {
  return items_ == other.items_;
}

}  // namespace flaxpp::ir
