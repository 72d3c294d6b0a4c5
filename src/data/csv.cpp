// The CSV reader of flaxpp/data/csv.hpp: numbers, one example a line, parsed into a Dataset
// on the host; the file is read whole into memory.
#include "flaxpp/data/csv.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

#include "data/text.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/core/host_memory.hpp"

namespace flaxpp::data {

namespace {

using text::quoted;
using text::trim;

// A number in the whole of `s` (no leading '+' in from_chars, so accept one here).
std::optional<double> parse_double(std::string_view s) {
  if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<std::int64_t> parse_int(std::string_view s) {
  if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

void split_fields(std::string_view line, std::vector<std::string_view>& fields) {
  fields.clear();
  for (;;) {
    const std::size_t comma = line.find(',');
    fields.push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return;
    line.remove_prefix(comma + 1);
  }
}

// "a, b, c" for up to 8 names, then how many there are in all.
std::string list_names(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 8;
  std::ostringstream os;
  for (std::size_t i = 0; i < std::min(names.size(), kShown); ++i)
    os << (i ? ", " : "") << quoted(names[i]);
  if (names.size() > kShown) os << ", ... (" << names.size() << " columns)";
  return os.str();
}

std::size_t label_index_from_header(const std::string& path, const std::vector<std::string>& names,
                                    const CsvOptions& opts) {
  const std::string& label_column = opts.label_column;
  if (label_column.empty()) return names.size() - 1;
  const auto count = std::count(names.begin(), names.end(), label_column);
  if (count == 0)
    throw ValueError(detail::str("load_csv: ", path, " has no column named ", quoted(label_column),
                                 "; its header names ", list_names(names), ". Set ",
                                 opts.option_prefix,
                                 "label_column to one of them, or "
                                 "leave it empty for the last column"));
  if (count > 1)
    throw ValueError(detail::str("load_csv: ", path, " has ", count, " columns named ",
                                 quoted(label_column),
                                 "; rename them so the label column is unambiguous"));
  return static_cast<std::size_t>(std::find(names.begin(), names.end(), label_column) -
                                  names.begin());
}

std::size_t label_index_from_number(const std::string& path, std::size_t ncols,
                                    const CsvOptions& opts) {
  const std::string& label_column = opts.label_column;
  if (label_column.empty()) return ncols - 1;
  const std::optional<std::int64_t> index = parse_int(label_column);
  if (!index)
    throw ValueError(detail::str("load_csv: without a header, ", opts.option_prefix,
                                 "label_column must be a 0-based column index such as \"0\"; got ",
                                 quoted(label_column), ". Set ", opts.option_prefix,
                                 "header = true if the first line of ", path,
                                 " names the columns"));
  if (*index < 0 || *index >= static_cast<std::int64_t>(ncols))
    throw ValueError(detail::str("load_csv: label column index ", *index,
                                 " is out of range; the rows of ", path, " have ", ncols,
                                 " columns, so expected an index in [0, ", ncols, ")"));
  return static_cast<std::size_t>(*index);
}

}  // namespace

Dataset load_csv(const std::string& path, CsvOptions opts) {
  return parse_csv(read_whole_file(path), path, std::move(opts));
}

Dataset parse_csv(std::string_view text, const std::string& path, CsvOptions opts) {
  if (!std::isfinite(opts.scale))
    throw ValueError(
        detail::str("load_csv: ", opts.option_prefix, "scale must be finite, got ", opts.scale));
  std::string_view rest(text);
  if (rest.starts_with("\xEF\xBB\xBF")) rest.remove_prefix(3);  // UTF-8 byte-order mark

  // Every field is a number (4 bytes, and its copy in the array), and no more fields than
  // commas and line ends: checked before anything is stored, then reserved once.
  const auto max_fields = static_cast<std::size_t>(std::count(rest.begin(), rest.end(), ',') +
                                                   std::count(rest.begin(), rest.end(), '\n') + 1);
  if (const auto shortfall = host_memory_shortfall(8.0 * static_cast<double>(max_fields)))
    throw ParseError(
        detail::str(path, ": storing its up to ", max_fields, " numbers ", *shortfall));
  std::vector<std::string> names;  // from the header
  std::size_t ncols = 0;           // fixed by the header or the first data row
  std::size_t label = 0;
  std::vector<float> x;
  std::vector<std::int32_t> y;
  x.reserve(max_fields);
  std::vector<std::string_view> fields;
  const auto column = [&](std::size_t j) {
    return names.empty() ? detail::str("column ", j + 1)
                         : detail::str("column ", j + 1, " (", quoted(names[j]), ")");
  };

  std::int64_t line_no = 0;
  while (!rest.empty()) {
    const std::size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol == std::string_view::npos ? rest.size() : eol + 1);
    ++line_no;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (trim(line).empty()) continue;
    split_fields(line, fields);
    const std::string where = detail::str(path, ":", line_no, ": ");

    if (ncols == 0) {
      ncols = fields.size();
      if (ncols < 2)
        throw ParseError(detail::str(where, "expected at least 2 comma-separated columns (",
                                     "features and a label), got ", ncols));
      if (opts.header) {
        for (std::string_view f : fields) {
          if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = f.substr(1, f.size() - 2);
          names.emplace_back(f);
        }
        label = label_index_from_header(path, names, opts);
        continue;
      }
      label = label_index_from_number(path, ncols, opts);
    }
    if (fields.size() != ncols)
      throw ParseError(detail::str(
          where, "expected ", ncols, " comma-separated numbers, got ", fields.size(),
          names.empty() ? " (as many as the first row has)" : " (as many as the header names)"));
    for (std::size_t j = 0; j < ncols; ++j) {
      const std::string_view f = fields[j];
      if (j == label) {
        const std::optional<std::int64_t> v = parse_int(f);
        if (!v || *v < 0 || *v > std::numeric_limits<std::int32_t>::max())
          throw ParseError(detail::str(where, "label ", column(j),
                                       ": expected an integer class index >= 0 that fits int32, "
                                       "got ",
                                       quoted(f), "; check that ", opts.option_prefix,
                                       "label_column names the label column"));
        y.push_back(static_cast<std::int32_t>(*v));
      } else {
        const std::optional<double> v = parse_double(f);
        if (!v)
          throw ParseError(detail::str(where, column(j), ": expected a number, got ", quoted(f),
                                       f.empty() ? " (an empty field)" : ""));
        x.push_back(round_to_float32(*v * static_cast<double>(opts.scale)));
      }
    }
  }
  if (ncols == 0)
    throw ParseError(detail::str(path, ": no lines with data; expected ",
                                 opts.header ? "a header line and then " : "",
                                 "one line of comma-separated numbers per example"));
  if (y.empty())
    throw ParseError(detail::str(path, ": the header is not followed by any data; expected ",
                                 "one line of comma-separated numbers per example"));
  const auto n = static_cast<std::int64_t>(y.size());
  const auto d = static_cast<std::int64_t>(ncols - 1);
  return Dataset{Array::from_vector(x, Shape{n, d}, Device::cpu()),
                 Array::from_vector(y, Shape{n}, Device::cpu())};
}

}  // namespace flaxpp::data
