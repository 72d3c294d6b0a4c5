// Typed access to a reference case's inputs, with errors that name the input's JSON path.
#include <cmath>
#include <utility>

#include "flaxpp/io/refs.hpp"
#include "io/refs/case_budget.hpp"

namespace flaxpp::refs {
namespace {
[[noreturn]] void fail(const std::string& path, const std::string& expected, const Json& got) {
  throw InputError(detail::str(path, ": expected ", expected, ", got ", io::describe_json(got)));
}

// Integers accept an integral float (3.0), as the Flax originals cast with int().
std::int64_t as_integer(const Json& v, const std::string& path) {
  if (const auto i = io::integer_value(v, true)) return *i;
  fail(path, "an integer within int64 (a float must have an integral value)", v);
}
}  // namespace

Inputs::Inputs(const Json& object, std::string path) : object_(&object), path_(std::move(path)) {
  if (!object.is_object()) fail(path_, "an object", object);
}

bool Inputs::has(std::string_view key) const {
  return object_->contains(key);
}

std::vector<std::string> Inputs::keys() const {
  std::vector<std::string> out;
  for (const auto& item : object_->items())
    out.push_back(item.key());
  return out;
}

const Json& Inputs::raw(std::string_view key) const {
  const auto it = object_->find(key);
  if (it == object_->end()) throw InputError(detail::str(at(key), ": missing"));
  return *it;
}

std::int64_t Inputs::integer(std::string_view key) const {
  return as_integer(raw(key), at(key));
}
std::int64_t Inputs::integer(std::string_view key, std::int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

double Inputs::number(std::string_view key) const {
  const Json& v = raw(key);
  if (!v.is_number()) fail(at(key), "a number", v);
  return v.get<double>();
}
double Inputs::number(std::string_view key, double fallback) const {
  return has(key) ? number(key) : fallback;
}

bool Inputs::boolean(std::string_view key, bool fallback) const {
  if (!has(key)) return fallback;
  const Json& v = raw(key);
  if (!v.is_boolean()) fail(at(key), "true or false", v);
  return v.get<bool>();
}

std::string Inputs::string(std::string_view key) const {
  const Json& v = raw(key);
  if (!v.is_string()) fail(at(key), "a string", v);
  return v.get<std::string>();
}

std::vector<std::int64_t> Inputs::int_list(std::string_view key) const {
  const Json& v = raw(key);
  if (!v.is_array()) return {as_integer(v, at(key))};
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i)
    out.push_back(as_integer(v[i], detail::str(at(key), "[", i, "]")));
  return out;
}

Shape Inputs::shape(std::string_view key) const {
  const Json& v = raw(key);
  if (!v.is_array()) fail(at(key), "a list of dimensions", v);
  std::vector<std::int64_t> dims = int_list(key);
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < 0) fail(detail::str(at(key), "[", i, "]"), "a dimension >= 0", v[i]);
  // The samplers and initialisers that take a shape hold about three arrays of it at once
  // (measured); four float32 arrays is the estimate.
  double elements = 1;
  for (std::int64_t d : dims)
    elements *= static_cast<double>(d);
  check_case_memory(4 * 4 * elements, at(key), detail::str("a shape of ", elements, " elements"));
  return Shape(std::move(dims));
}

Array Inputs::array(std::string_view key) const {
  try {
    return io::array_from_json(raw(key), at(key));
  } catch (const ParseError& e) {
    throw InputError(e.what());
  }
}

random::Key Inputs::key(std::string_view key, random::ThreefryMode mode) const {
  const Array data = array(key);
  if (data.dtype() != DType::u32 || data.shape() != Shape{2})
    throw InputError(detail::str(at(key), ": expected key data uint32[2], got ",
                                 dtype_name(data.dtype()), data.shape()));
  return random::Key::from_data(data, mode);
}

Inputs Inputs::object(std::string_view key, bool optional) const {
  static const Json kEmpty = Json::object();
  if (optional && !has(key)) return Inputs(kEmpty, at(key));
  return Inputs(raw(key), at(key));
}

void Inputs::expect_only(std::initializer_list<std::string_view> accepted,
                         std::string_view what) const {
  expect_only(std::span<const std::string_view>(accepted.begin(), accepted.size()), what);
}

void Inputs::expect_only(std::span<const std::string_view> accepted, std::string_view what) const {
  for (const auto& item : object_->items()) {
    bool ok = false;
    for (std::string_view a : accepted)
      ok = ok || item.key() == a;
    if (ok) continue;
    std::string list;
    for (std::string_view a : accepted)
      list += detail::str(list.empty() ? "" : ", ", a);
    throw InputError(detail::str(
        at(item.key()), ": ", what, " does not accept \"", item.key(), "\"",
        list.empty() ? std::string("; it takes no arguments") : detail::str("; accepted: ", list)));
  }
}

}  // namespace flaxpp::refs
