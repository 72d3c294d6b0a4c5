// Tolerance comparison of a computed tree against a reference tree.
#include <bit>
#include <cmath>
#include <iomanip>
#include <limits>
#include <set>
#include <sstream>

#include "flaxpp/io/refs.hpp"

namespace flaxpp::refs {
namespace {

// Distance in float32 steps: map each float's bits onto a line where adjacent floats are
// adjacent integers (negative floats mirrored), then subtract.
std::int64_t ulp_distance_f32(float a, float b) {
  auto ordered = [](float f) {
    const auto i = std::bit_cast<std::int32_t>(f);
    return i < 0 ? static_cast<std::int64_t>(INT32_MIN) - i : static_cast<std::int64_t>(i);
  };
  return std::abs(ordered(a) - ordered(b));
}

// The ulp criterion counts float32 steps, so it only applies to values float32 can hold
// (float64 data beyond its range must meet rtol/atol).
bool within_ulp(double got, double want, double ulp) {
  constexpr double kMax = std::numeric_limits<float>::max();
  if (std::abs(got) > kMax || std::abs(want) > kMax) return false;
  return static_cast<double>(ulp_distance_f32(static_cast<float>(got), static_cast<float>(want))) <=
         ulp;
}

std::string unravel(std::int64_t flat, const Shape& shape) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(shape.rank()));
  for (std::int64_t axis = shape.rank() - 1; axis >= 0; --axis) {
    const std::int64_t d = shape.dims()[static_cast<std::size_t>(axis)];
    idx[static_cast<std::size_t>(axis)] = flat % d;
    flat /= d;
  }
  return Shape(idx).str();
}

std::string fmt(double v, DType dtype) {
  std::ostringstream os;
  os << std::setprecision(dtype == DType::f64 ? 17 : 9) << v;
  return os.str();
}

std::string where(const std::string& path) {
  return path.empty() ? "(root)" : "\"" + path + "\"";
}

std::vector<double> as_doubles(const Array& a) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(a.size()));
  const Array host = a.to(Device::cpu());
  visit_host_dtype(a.dtype(), "compare", [&]<class T>(TypeTag<T>) {
    for (T v : host.host_span<T>())
      out.push_back(static_cast<double>(v));
  });
  return out;
}

std::optional<std::string> compare_leaf(const std::string& path, const Array& got,
                                        const Array& want, const Tolerance& tol) {
  if (got.dtype() != want.dtype())
    return detail::str("at ", where(path), ": dtype ", dtype_name(got.dtype()), ", want ",
                       dtype_name(want.dtype()));
  if (got.shape() != want.shape())
    return detail::str("at ", where(path), ": shape ", got.shape(), ", want ", want.shape());
  const std::vector<double> g = as_doubles(got);
  const std::vector<double> w = as_doubles(want);
  const bool floating = is_floating(want.dtype());
  std::optional<std::size_t> first_bad;
  double max_abs = 0, max_rel = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    bool ok = false;
    if (!floating) {
      ok = g[i] == w[i];
    } else if (std::isnan(w[i]) || std::isinf(w[i])) {
      ok = std::isnan(w[i]) ? std::isnan(g[i]) : g[i] == w[i];
    } else if (std::isfinite(g[i])) {
      const double abs_err = std::abs(g[i] - w[i]);
      max_abs = std::max(max_abs, abs_err);
      if (w[i] != 0) max_rel = std::max(max_rel, abs_err / std::abs(w[i]));
      ok = abs_err <= tol.atol + tol.rtol * std::abs(w[i]) ||
           (tol.ulp && within_ulp(g[i], w[i], *tol.ulp));
    }
    if (!ok && !first_bad) first_bad = i;
  }
  if (!first_bad) return std::nullopt;
  const std::size_t i = *first_bad;
  std::string msg =
      detail::str("at ", where(path), unravel(static_cast<std::int64_t>(i), want.shape()), ": got ",
                  fmt(g[i], want.dtype()), ", want ", fmt(w[i], want.dtype()));
  if (floating) {
    msg += detail::str("; max abs err ", fmt(max_abs, DType::f32), ", max rel err ",
                       fmt(max_rel, DType::f32), " (rtol ", tol.rtol, ", atol ", tol.atol);
    if (tol.ulp) {
      msg += detail::str(", ulp ", *tol.ulp);
      if (within_ulp(g[i], w[i], std::numeric_limits<double>::infinity()))
        msg += detail::str("; this element is ",
                           ulp_distance_f32(static_cast<float>(g[i]), static_cast<float>(w[i])),
                           " ulp away");
    }
    msg += ")";
  }
  return msg;
}

}  // namespace

std::optional<std::string> compare(const Tree& got, const Tree& want, const Tolerance& tolerance) {
  const auto g = got.flatten();
  const auto w = want.flatten();
  std::set<std::string> got_paths, want_paths;
  for (const auto& [p, a] : g)
    got_paths.insert(p);
  for (const auto& [p, a] : w)
    want_paths.insert(p);
  if (got_paths != want_paths) {
    std::string missing, extra;
    for (const auto& p : want_paths)
      if (!got_paths.count(p)) missing += detail::str(missing.empty() ? "" : ", ", where(p));
    for (const auto& p : got_paths)
      if (!want_paths.count(p)) extra += detail::str(extra.empty() ? "" : ", ", where(p));
    return detail::str("tree paths differ: missing [", missing, "], unexpected [", extra, "]");
  }
  for (std::size_t i = 0; i < w.size(); ++i)
    if (auto m = compare_leaf(w[i].first, g[i].second, w[i].second, tolerance)) return m;
  return std::nullopt;
}

std::optional<std::string> compare_records(const Records& got, const Json& want,
                                           const std::string& path) {
  if (!want.is_array())
    throw ParseError(
        detail::str(path, ": expected a list of records, got ", io::describe_json(want)));
  std::multiset<std::string> g, w;
  for (const Json& r : got.items)
    g.insert(r.dump());
  for (std::size_t i = 0; i < want.size(); ++i) {
    // dump() recurses once per level: a hostile record must not overflow the stack.
    if (io::nested_deeper_than(want[i], Tree::kMaxDepth))
      throw ParseError(detail::str(path, "[", i, "]: the record is nested more than ",
                                   Tree::kMaxDepth, " levels deep"));
    w.insert(want[i].dump());
  }
  if (g == w) return std::nullopt;
  auto minus = [](const std::multiset<std::string>& a, const std::multiset<std::string>& b) {
    std::multiset<std::string> rest = a;
    for (const std::string& s : b)
      if (auto it = rest.find(s); it != rest.end()) rest.erase(it);
    std::string out;
    for (const std::string& s : rest)
      out += detail::str(out.empty() ? "" : ", ", s);
    return out;
  };
  return detail::str("records differ: missing [", minus(w, g), "], unexpected [", minus(g, w), "]");
}

}  // namespace flaxpp::refs
