// The .npy reader and writer of flaxpp/data/npy.hpp, and from_npy's Dataset of two .npy files.
// Host code only; every file is read whole into memory.
#include "flaxpp/data/npy.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include "data/text.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/core/host_memory.hpp"

namespace flaxpp::data {

// .npy data is little-endian; reading it with memcpy assumes the host is too.
static_assert(std::endian::native == std::endian::little,
              "flaxpp's .npy reader and writer assume a little-endian host");

namespace {

using text::quoted;
using text::trim;

// The dtypes a .npy file may hold; i64 is not an Array dtype and is narrowed to int32.
enum class NpyType { f32, f64, i32, u32, bool_, i64 };

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

// The header is a Python dict literal written by numpy, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }  — parsed without Python's
// full grammar: strings without escapes, True/False, and tuples of non-negative integers.
class NpyHeaderParser {
 public:
  NpyHeaderParser(const std::string& path, std::string_view text) : path_(path), text_(text) {}

  NpyHeader parse() {
    NpyHeader h;
    bool has_descr = false, has_fortran = false, has_shape = false;
    skip_space();
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const std::size_t key_pos = pos_;
      const std::string key = parse_string("a quoted key");
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() == '[')
          fail("structured dtypes (a list 'descr') are not supported; save plain numeric arrays");
        h.descr = parse_string("a dtype string such as '<f4'");
        has_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = parse_bool();
        has_fortran = true;
      } else if (key == "shape") {
        h.shape = parse_shape();
        has_shape = true;
      } else {
        pos_ = key_pos;
        fail(detail::str("unexpected key '", key, "'; expected 'descr', 'fortran_order', 'shape'"));
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}' after a value");
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) fail("expected the header to end after '}'");
    if (!has_descr || !has_fortran || !has_shape)
      fail("expected the keys 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ParseError(detail::str(path_, ": malformed .npy header at character ", pos_ + 1, ": ",
                                 what, "; the header reads ", quoted(trim(text_)),
                                 ". Write the file with numpy.save"));
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    if (peek() != c) fail(detail::str("expected '", c, "'"));
    ++pos_;
  }
  std::string parse_string(const char* what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail(detail::str("expected ", what));
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    if (s.find('\\') != std::string::npos) fail("escape sequences are not supported in strings");
    pos_ = end + 1;
    return s;
  }
  bool parse_bool() {
    for (const auto& [word, value] :
         {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    fail("expected True or False");
  }
  std::vector<std::int64_t> parse_shape() {
    std::vector<std::int64_t> dims;
    expect('(');
    for (;;) {
      skip_space();
      if (peek() == ')') break;
      const std::size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
        ++pos_;
      std::int64_t d = 0;
      const auto [end, ec] = std::from_chars(text_.data() + start, text_.data() + pos_, d);
      if (start == pos_ || ec != std::errc())
        fail("expected a dimension (a non-negative integer that fits int64)");
      if (peek() == 'L') ++pos_;  // Python 2's long literals
      dims.push_back(d);
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in the shape tuple");
      }
    }
    ++pos_;
    return dims;
  }

  const std::string& path_;
  std::string_view text_;
  std::size_t pos_ = 0;
};

NpyType npy_type(const std::string& path, const std::string& descr) {
  if (descr == "<f4") return NpyType::f32;
  if (descr == "<f8") return NpyType::f64;
  if (descr == "<i4") return NpyType::i32;
  if (descr == "<u4") return NpyType::u32;
  if (descr == "|b1") return NpyType::bool_;
  if (descr == "<i8") return NpyType::i64;
  throw ParseError(detail::str(
      path, ": unsupported .npy dtype '", descr,
      "'; expected '<f4', '<f8', '<i4', '<u4', '|b1' or '<i8' (read as int32). Convert before "
      "saving, e.g. numpy.save(path, a.astype('<f4'))"));
}

std::size_t npy_itemsize(NpyType t) {
  switch (t) {
    case NpyType::f32:
    case NpyType::i32:
    case NpyType::u32:
      return 4;
    case NpyType::f64:
    case NpyType::i64:
      return 8;
    case NpyType::bool_:
      return 1;
  }
  FLAXPP_ASSERT(false, "unhandled NpyType");
  return 0;
}

std::uint32_t read_le(std::string_view bytes, std::size_t offset, std::size_t width) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < width; ++i)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return v;
}

// "(2, 3)", "(4,)", "()": how numpy writes a shape in the header.
std::string python_tuple(const std::vector<std::int64_t>& dims) {
  std::ostringstream os;
  os << '(';
  for (std::size_t i = 0; i < dims.size(); ++i)
    os << (i ? ", " : "") << dims[i];
  if (dims.size() == 1) os << ',';
  os << ')';
  return os.str();
}

}  // namespace

Array load_npy(const std::string& path) {
  return parse_npy(read_whole_file(path), path);
}

Array parse_npy(std::string_view bytes, const std::string& path) {
  constexpr std::string_view kMagic("\x93NUMPY", 6);
  if (!bytes.starts_with(kMagic))
    throw ParseError(detail::str(path, ": not a NumPy .npy file: expected it to start with the ",
                                 "magic string \\x93NUMPY, got ", quoted(bytes.substr(0, 6)),
                                 ". Write .npy files with numpy.save"));
  if (bytes.size() < 10)
    throw ParseError(detail::str(path, ": truncated .npy file: ", bytes.size(),
                                 " bytes, too short for the format version and header length"));
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    throw ParseError(detail::str(path, ": .npy format version ", major, ".", minor,
                                 " is not supported; expected 1.0, 2.0 or 3.0"));
  // Version 1.0 stores the header length in 2 bytes, later versions in 4.
  const std::size_t len_width = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_width)
    throw ParseError(detail::str(path, ": truncated .npy file: it ends inside the header length"));
  const std::size_t header_len = read_le(bytes, 8, len_width);
  const std::size_t data_offset = 8 + len_width + header_len;
  if (bytes.size() < data_offset)
    throw ParseError(detail::str(path, ": truncated .npy file: the header should be ", header_len,
                                 " bytes, the file ends after ", bytes.size() - 8 - len_width));
  const NpyHeader h = NpyHeaderParser(path, bytes.substr(8 + len_width, header_len)).parse();
  const NpyType type = npy_type(path, h.descr);
  if (h.fortran_order)
    throw ParseError(detail::str(path,
                                 ": the array is stored in Fortran order (fortran_order: "
                                 "True); flaxpp reads C order only. Save ",
                                 "numpy.ascontiguousarray(a) instead"));

  // Check the element count against the file size before any Shape or allocation exists (a
  // corrupt header must not request terabytes).
  const std::size_t item = npy_itemsize(type);
  const std::size_t available = bytes.size() - data_offset;
  const bool empty = std::find(h.shape.begin(), h.shape.end(), 0) != h.shape.end();
  std::uint64_t count = empty ? 0 : 1;
  for (std::size_t i = 0; i < h.shape.size() && !empty; ++i) {
    const auto d = static_cast<std::uint64_t>(h.shape[i]);
    if (count > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / item / d)
      throw ParseError(detail::str(path, ": the header's shape ", python_tuple(h.shape),
                                   " would need more than 2^63 bytes of '", h.descr,
                                   "' data; the header is corrupt"));
    count *= d;
  }
  if (count * item != available) {
    if (count * item > available)
      throw ParseError(detail::str(path, ": truncated .npy file: a '", h.descr, "' array of shape ",
                                   python_tuple(h.shape), " needs ", count * item,
                                   " data bytes, the file has ", available, " after its header"));
    throw ParseError(detail::str(path, ": ", available - count * item,
                                 " unexpected bytes after the data of a '", h.descr,
                                 "' array of shape ", python_tuple(h.shape),
                                 "; expected one array per file, as numpy.save writes"));
  }
  // The array is a copy of the data (int64 data narrowed to half its size).
  if (const auto shortfall = host_memory_shortfall(static_cast<double>(count * item)))
    throw ParseError(
        detail::str(path, ": its array of shape ", python_tuple(h.shape), " ", *shortfall));
  std::optional<Shape> checked_shape;
  try {
    checked_shape.emplace(h.shape);
  } catch (const ValueError& e) {
    throw ParseError(detail::str(path, ": unusable shape ", python_tuple(h.shape), ": ", e.what()));
  }
  const Shape& shape = *checked_shape;
  const char* data = bytes.data() + data_offset;
  const auto n = static_cast<std::size_t>(count);

  switch (type) {
    case NpyType::f32:
      return Array::from_host_bytes(data, shape, DType::f32, Device::cpu());
    case NpyType::f64:
      return Array::from_host_bytes(data, shape, DType::f64, Device::cpu());
    case NpyType::i32:
      return Array::from_host_bytes(data, shape, DType::i32, Device::cpu());
    case NpyType::u32:
      return Array::from_host_bytes(data, shape, DType::u32, Device::cpu());
    case NpyType::bool_:
      for (std::size_t i = 0; i < n; ++i)
        if (static_cast<unsigned char>(data[i]) > 1)
          throw ParseError(detail::str(path, ": element ", i, " of a '|b1' array is the byte ",
                                       static_cast<int>(static_cast<unsigned char>(data[i])),
                                       "; expected 0 or 1"));
      return Array::from_host_bytes(data, shape, DType::bool_, Device::cpu());
    case NpyType::i64: {
      std::vector<std::int32_t> narrowed(n);
      for (std::size_t i = 0; i < n; ++i) {
        std::int64_t v = 0;
        std::memcpy(&v, data + i * 8, 8);
        if (v < std::numeric_limits<std::int32_t>::min() ||
            v > std::numeric_limits<std::int32_t>::max())
          throw ParseError(detail::str(
              path, ": element ", i, " of a '<i8' array is ", v,
              ", which does not fit int32 (flaxpp reads '<i8' as int32); save the array as "
              "float64 or split it so every value lies in [-2^31, 2^31)"));
        narrowed[i] = static_cast<std::int32_t>(v);
      }
      return Array::from_host_bytes(narrowed.data(), shape, DType::i32, Device::cpu());
    }
  }
  FLAXPP_ASSERT(false, "unhandled NpyType");
  return {};
}

void save_npy(const std::string& path, const Array& a) {
  constexpr PerDType<std::string_view> kDescr("<f4", "<f8", "", "", "<i4", "<u4", "|b1");
  const std::string_view descr = kDescr[a.dtype()];
  if (descr.empty())
    throw ValueError(detail::str("save_npy: ", dtype_name(a.dtype()),
                                 " arrays are not supported; expected float32, float64, int32, "
                                 "uint32 or bool. Convert with convert_element_type first"));
  const Array host = a.to(Device::cpu());
  std::string header =
      detail::str("{'descr': '", descr,
                  "', 'fortran_order': False, 'shape': ", python_tuple(a.shape().dims()), ", }");
  // As numpy does: pad with spaces and a final '\n' so the data starts 64-byte aligned, and
  // use version 2.0 only when the header does not fit version 1.0's 2-byte length.
  const auto padded = [&](std::size_t prefix) {
    const std::size_t unpadded = prefix + header.size() + 1;
    return header.size() + 1 + (64 - unpadded % 64) % 64;
  };
  const bool v1 = padded(10) <= 0xFFFF;
  const std::size_t prefix = v1 ? 10 : 12;
  const std::size_t header_len = padded(prefix);
  header.resize(header_len - 1, ' ');
  header.push_back('\n');

  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(v1 ? 1 : 2));
  out.push_back('\0');
  for (std::size_t i = 0; i < prefix - 8; ++i)
    out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xFF));
  out += header;

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    throw ValueError(detail::str("save_npy: cannot open ", path,
                                 " for writing; check that its directory exists and is writable"));
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  if (host.nbytes() > 0)
    f.write(static_cast<const char*>(host.buffer().data()),
            static_cast<std::streamsize>(host.nbytes()));
  f.close();
  if (!f) throw ValueError(detail::str("save_npy: writing ", path, " failed (disk full?)"));
}

Dataset from_npy(const std::string& x_path, const std::string& y_path) {
  Array x = load_npy(x_path);
  Array y = load_npy(y_path);
  if (x.rank() < 1)
    throw ParseError(detail::str(x_path, ": expected features x of shape [N, ...], got a 0-d ",
                                 dtype_name(x.dtype()), " array"));
  if (x.dtype() == DType::f64) {
    const std::span<const double> v = x.host_span<double>();
    std::vector<float> rounded(v.size());
    std::transform(v.begin(), v.end(), rounded.begin(), round_to_float32);
    x = Array::from_vector(rounded, x.shape(), Device::cpu());
  } else if (x.dtype() != DType::f32) {
    throw ParseError(detail::str(x_path, ": expected float32 or float64 features, got ",
                                 dtype_name(x.dtype()), "; save x.astype(numpy.float32)"));
  }
  if (y.rank() != 1 || y.dtype() != DType::i32)
    throw ParseError(
        detail::str(y_path, ": expected integer labels of shape [N] ('<i4' or '<i8'), ", "got a ",
                    dtype_name(y.dtype()), y.shape(), " array; save y.astype(numpy.int32)"));
  if (x.shape()[0] != y.shape()[0])
    throw ParseError(detail::str(y_path, ": ", y.shape()[0], " labels for the ", x.shape()[0],
                                 " rows of ", x_path, "; expected one label per row"));
  const std::span<const std::int32_t> labels = y.host_span<std::int32_t>();
  const auto negative = std::find_if(labels.begin(), labels.end(), [](auto l) { return l < 0; });
  if (negative != labels.end())
    throw ParseError(detail::str(y_path, ": label ", negative - labels.begin(), " is ", *negative,
                                 "; expected class indices >= 0"));
  return Dataset{std::move(x), std::move(y)};
}

}  // namespace flaxpp::data
