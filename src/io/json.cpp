// Array/Tree <-> JSON in the flaxpp.refs/1 encoding.
#include "flaxpp/io/json.hpp"

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "flaxpp/core/host_memory.hpp"

namespace flaxpp::io {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& expected, const Json& got) {
  throw ParseError(detail::str(path, ": expected ", expected, ", got ", describe_json(got)));
}

// A value's path for a message: a string, or a callable that spells it (so that a large array's
// elements spell theirs only when they fail).
template <class Path>
std::string spelled(const Path& path) {
  if constexpr (std::is_invocable_v<const Path&>) {
    return path();
  } else {
    return path;
  }
}

template <class Path>
double parse_float(const Json& v, const Path& path) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  fail(spelled(path), "a number or one of \"NaN\", \"Infinity\", \"-Infinity\"", v);
}

template <class T, class Path>
T parse_integer(const Json& v, const Path& path) {
  if (const auto i = integer_value(v); i && std::in_range<T>(*i)) return static_cast<T>(*i);
  fail(spelled(path),
       detail::str("an integer in [", +std::numeric_limits<T>::min(), ", ",
                   +std::numeric_limits<T>::max(), "]"),
       v);
}

template <class T>
Json float_to_json(T x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return static_cast<double>(x);
}

}  // namespace

std::optional<std::int64_t> integer_value(const Json& v, bool allow_integral_float) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    return std::in_range<std::int64_t>(u)
               ? std::optional<std::int64_t>(static_cast<std::int64_t>(u))
               : std::nullopt;
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (allow_integral_float && v.is_number_float()) {
    const double d = v.get<double>();
    // [-2^63, 2^63): every integral double there converts exactly.
    if (std::isfinite(d) && d == std::trunc(d) && d >= -0x1p63 && d < 0x1p63)
      return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

bool nested_deeper_than(const Json& j, std::size_t max_depth) {
  std::vector<std::pair<const Json*, std::size_t>> stack{{&j, 0}};  // (value, its depth)
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    if (depth >= max_depth) return true;
    for (const Json& child : *v)
      stack.emplace_back(&child, depth + 1);
  }
  return false;
}

std::string describe_json(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return detail::str("the boolean ", j.dump());
    case Json::value_t::string:
      return detail::str("the string ", j.dump());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return detail::str("the number ", j.dump());
    case Json::value_t::array:
      return detail::str("an array of ", j.size(), " elements");
    case Json::value_t::object:
      return detail::str("an object with ", j.size(), " keys");
    default:
      return "a value of unsupported type";
  }
}

bool is_array_json(const Json& j) {
  return j.is_object() && j.size() == 3 && j.contains("dtype") && j.contains("shape") &&
         j.contains("data");
}

Array array_from_json(const Json& j, const std::string& path) {
  if (!j.is_object()) fail(path, "an array object {\"dtype\", \"shape\", \"data\"}", j);
  for (const char* key : {"dtype", "shape", "data"})
    if (!j.contains(key))
      throw ParseError(detail::str(path, ": missing key \"", key,
                                   "\" (an array is {\"dtype\", \"shape\", \"data\"})"));
  const Json& jd = j["dtype"];
  if (!jd.is_string()) fail(path + ".dtype", "a dtype name string", jd);
  const auto& name = jd.get_ref<const std::string&>();
  if (name != "float32" && name != "float64" && name != "int32" && name != "uint32" &&
      name != "bool")
    throw ParseError(detail::str(path, ".dtype: \"", name, "\" is not a refs-format dtype; ",
                                 "expected one of float32, float64, int32, uint32, bool"));
  const DType dtype = dtype_from_name(name);
  const Json& js = j["shape"];
  if (!js.is_array()) fail(path + ".shape", "a list of dimensions", js);
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < js.size(); ++i) {
    const std::int64_t d = parse_integer<std::int64_t>(js[i], detail::str(path, ".shape[", i, "]"));
    if (d < 0) fail(detail::str(path, ".shape[", i, "]"), "a dimension >= 0", js[i]);
    dims.push_back(d);
  }
  Shape shape;
  try {
    shape = Shape(std::move(dims));
  } catch (const ValueError& e) {
    throw ParseError(detail::str(path, ".shape: ", e.what()));
  }
  const Json& data = j["data"];
  if (!data.is_array()) fail(path + ".data", "a list of values", data);
  if (static_cast<std::int64_t>(data.size()) != shape.size())
    throw ParseError(detail::str(path, ".data: has ", data.size(), " values, but shape ", shape,
                                 " needs ", shape.size(), " (data is the row-major flattening)"));
  return visit_host_dtype(dtype, "array_from_json", [&]<class T>(TypeTag<T>) {
    std::vector<T> values(data.size());
    for (std::size_t i = 0; i < data.size(); ++i) {
      const Json& v = data[i];
      // The element's path, spelled only for a value that is not plainly one of T.
      const auto at = [&] { return detail::str(path, ".data[", i, "]"); };
      if constexpr (std::is_floating_point_v<T>) {
        // Rounded to the declared dtype, as the refs format says.
        if constexpr (std::is_same_v<T, float>) {
          values[i] = round_to_float32(parse_float(v, at));
        } else {
          values[i] = parse_float(v, at);
        }
      } else if constexpr (std::is_same_v<T, std::uint8_t>) {
        if (!v.is_boolean()) fail(at(), "true or false", v);
        values[i] = v.get<bool>() ? 1 : 0;
      } else {
        values[i] = parse_integer<T>(v, at);
      }
    }
    return Array::from_host_bytes(values.data(), shape, dtype, Device::cpu());
  });
}

Json array_to_json(const Array& array) {
  Json data = Json::array();
  const Array host = array.to(Device::cpu());
  visit_host_dtype(array.dtype(), "array_to_json", [&]<class T>(TypeTag<T>) {
    for (T v : host.host_span<T>()) {
      if constexpr (std::is_floating_point_v<T>) {
        data.push_back(float_to_json(v));
      } else if constexpr (std::is_same_v<T, std::uint8_t>) {
        data.push_back(v != 0);
      } else {
        data.push_back(v);
      }
    }
  });
  return Json{{"dtype", dtype_name(array.dtype())},
              {"shape", array.shape().dims()},
              {"data", std::move(data)}};
}

namespace {
Tree tree_from_json_at(const Json& j, const std::string& path, std::size_t depth) {
  if (is_array_json(j)) return Tree(array_from_json(j, path));
  if (!j.is_object()) fail(path, "an array object or an object of named subtrees", j);
  // Deeper trees are refused rather than recursed into (hostile files must not crash us).
  if (depth >= Tree::kMaxDepth)
    throw ParseError(
        detail::str(path, ": the tree is nested more than ", Tree::kMaxDepth, " levels deep"));
  Tree tree;
  for (const auto& [key, value] : j.items())
    tree.set(key, tree_from_json_at(value, path + "." + key, depth + 1));
  return tree;
}
}  // namespace

Tree tree_from_json(const Json& j, const std::string& path) {
  return tree_from_json_at(j, path, 0);
}

Json tree_to_json(const Tree& tree) {
  if (tree.is_leaf()) return array_to_json(tree.array());
  Json out = Json::object();
  for (const auto& [key, value] : tree.items())
    out[key] = tree_to_json(value);
  return out;
}

namespace {

// Bytes that nlohmann::json (libstdc++) takes for what a SAX pass sees: every value is 16 bytes
// in its parent (twice that while a growing vector doubles), a string, array or object
// allocates its container, and each object member a map node with its key.
class JsonMemoryCount : public nlohmann::json_sax<Json> {
 public:
  double bytes = 0;

  bool null() override { return value(0); }
  bool boolean(bool) override { return value(0); }
  bool number_integer(number_integer_t) override { return value(0); }
  bool number_unsigned(number_unsigned_t) override { return value(0); }
  bool number_float(number_float_t, const string_t&) override { return value(0); }
  bool string(string_t& s) override { return value(kContainer + static_cast<double>(s.size())); }
  bool binary(binary_t& b) override { return value(kContainer + static_cast<double>(b.size())); }
  bool start_object(std::size_t) override { return value(kContainer); }
  bool key(string_t& k) override {
    bytes += kMapNode + static_cast<double>(k.size());
    return true;
  }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return value(kContainer); }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;  // Json::parse reports it
  }

 private:
  static constexpr double kValue = 2 * sizeof(Json), kContainer = 64, kMapNode = 96;
  bool value(double extra) {
    bytes += kValue + extra;
    return true;
  }
};

// An upper bound of the parsed size per byte of text: "[]," is 3 bytes of text for a value, a
// vector and its allocation (about 32 bytes per text byte at the most).
constexpr double kMaxJsonBytesPerTextByte = 32;

}  // namespace

void check_json_memory(std::string_view text, const std::string& source) {
  const double bound = kMaxJsonBytesPerTextByte * static_cast<double>(text.size());
  if (!host_memory_shortfall(bound)) return;
  JsonMemoryCount count;
  Json::sax_parse(text, &count);
  if (const auto shortfall = host_memory_shortfall(count.bytes))
    throw ParseError(detail::str(source, ": parsing its ",
                                 format_bytes(static_cast<double>(text.size())), " of JSON ",
                                 *shortfall, "; free memory or use a machine with more"));
}

Json read_json_file(const std::string& filename) {
  return parse_json(read_whole_file(filename), filename);
}

Json parse_json(std::string_view text, const std::string& source) {
  check_json_memory(text, source);
  // nlohmann's messages start with its exception's name ("[json.exception.parse_error.101] "),
  // which means nothing to a person fixing the file.
  auto reason = [](const Json::exception& e) {
    const std::string_view what = e.what();
    const std::size_t end = what.starts_with("[json.exception.") ? what.find("] ") : what.npos;
    return std::string(end == what.npos ? what : what.substr(end + 2));
  };
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    // Turn nlohmann's byte offset into a line and column a person can find.
    const std::size_t offset = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < offset; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw ParseError(detail::str(source, ":", line, ":", col, ": not valid JSON (", reason(e),
                                 "); note that NaN and Infinity must be the strings \"NaN\", "
                                 "\"Infinity\", \"-Infinity\""));
  } catch (const Json::exception& e) {
    // e.g. a number too large for a double (out_of_range.406).
    throw ParseError(detail::str(source, ": not valid JSON for flaxpp (", reason(e), ")"));
  }
}

}  // namespace flaxpp::io
