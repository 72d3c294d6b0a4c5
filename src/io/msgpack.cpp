// src/io/msgpack.cpp — the MessagePack wire format
// (github.com/msgpack/msgpack/blob/master/spec.md): a bounds-checked recursive decoder and a
// smallest-encoding writer. No flaxpp types here.
#include "io/msgpack.hpp"

#include <algorithm>
#include <bit>
#include <limits>

#include "flaxpp/core/error.hpp"
#include "flaxpp/core/host_memory.hpp"

namespace flaxpp::io::msgpack {
namespace {

// Deeper nesting is refused rather than recursed into (hostile files must not crash us).
constexpr int kMaxDepth = 256;

class Reader {
 public:
  Reader(std::string_view data, const std::string& source, std::size_t base_offset)
      : data_(data), source_(source), base_(base_offset) {}

  Value read_document() {
    Value v = read_value(0);
    if (pos_ != data_.size())
      fail(pos_, detail::str(data_.size() - pos_,
                             " bytes follow the end of the value; the data "
                             "is corrupt or is not a single msgpack value"));
    return v;
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& problem) const {
    throw ParseError(detail::str(source_, ": byte ", base_ + at, ": ", problem));
  }

  void need(std::size_t n, const char* what) const {
    if (data_.size() - pos_ < n)
      fail(pos_,
           detail::str("truncated: ", what, " needs ", n, " more bytes, only ", data_.size() - pos_,
                       " remain (the file was cut short or is corrupt)"));
  }

  std::uint64_t read_be(int n_bytes, const char* what) {
    need(static_cast<std::size_t>(n_bytes), what);
    std::uint64_t v = 0;
    for (int i = 0; i < n_bytes; ++i)
      v = (v << 8) | static_cast<std::uint8_t>(data_[pos_++]);
    return v;
  }

  std::string_view read_bytes(std::uint64_t n, const char* what, Value& v) {
    if (n > data_.size() - pos_)
      fail(pos_, detail::str("truncated: ", what, " of ", n, " bytes, only ", data_.size() - pos_,
                             " remain (the file was cut short or is corrupt)"));
    v.bytes_offset = base_ + pos_;
    const std::string_view out = data_.substr(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return out;
  }

  void read_items(Value& v, std::uint64_t n_items, int depth, const char* what) {
    // Every item takes at least one byte: a count beyond the remaining bytes is corrupt, and
    // checking it first keeps a hostile count from reserving gigabytes.
    if (n_items > data_.size() - pos_)
      fail(v.offset - base_,
           detail::str("truncated: ", what, " with ", n_items, " items cannot fit in the ",
                       data_.size() - pos_, " remaining bytes"));
    if (depth >= kMaxDepth)
      fail(v.offset - base_, detail::str("nested more than ", kMaxDepth, " levels deep"));
    account(n_items, v.offset);
    v.items.reserve(static_cast<std::size_t>(n_items));
    for (std::uint64_t i = 0; i < n_items; ++i)
      v.items.push_back(read_value(depth + 1));
  }

  // Each item is a Value of about 100 bytes, however small its encoding: a file of a few MB
  // can ask for GBs. The total is checked against the host memory available whenever it grows
  // a quarter past the last check, and never passes what was available then.
  void account(std::uint64_t n_items, std::size_t offset) {
    values_bytes_ += static_cast<double>(n_items) * sizeof(Value);
    if (values_bytes_ <= next_check_) return;
    if (const auto shortfall = host_memory_shortfall(values_bytes_))
      fail(offset - base_,
           detail::str("decoding ", static_cast<std::uint64_t>(values_bytes_ / sizeof(Value)),
                       " values (", sizeof(Value), " bytes each) ", *shortfall));
    next_check_ = std::min(1.25 * values_bytes_, static_cast<double>(available_host_memory()));
  }

  void read_ext(Value& v, std::uint64_t size) {
    need(1, "an ext type code");
    v.kind = Kind::ext;
    v.ext_type = static_cast<std::int8_t>(static_cast<std::uint8_t>(data_[pos_++]));
    v.bytes = read_bytes(size, "an ext payload", v);
  }

  Value read_value(int depth) {
    Value v;
    v.offset = base_ + pos_;
    need(1, "a value");
    const auto b = static_cast<std::uint8_t>(data_[pos_++]);
    if (b <= 0x7f) {
      v.kind = Kind::uint_;
      v.uint_value = b;
    } else if (b >= 0xe0) {
      v.kind = Kind::int_;
      v.int_value = static_cast<std::int8_t>(b);
    } else if ((b & 0xf0) == 0x80) {
      v.kind = Kind::map;
      read_items(v, 2u * (b & 0x0fu), depth, "a map");
    } else if ((b & 0xf0) == 0x90) {
      v.kind = Kind::array;
      read_items(v, b & 0x0fu, depth, "an array");
    } else if ((b & 0xe0) == 0xa0) {
      v.kind = Kind::str;
      v.bytes = read_bytes(b & 0x1fu, "a string", v);
    } else {
      switch (b) {
        case 0xc0:
          v.kind = Kind::nil;
          break;
        case 0xc1:
          fail(v.offset - base_,
               "0xc1 is a reserved msgpack byte (never valid); the data is corrupt");
        case 0xc2:
        case 0xc3:
          v.kind = Kind::boolean;
          v.boolean = b == 0xc3;
          break;
        case 0xc4:
        case 0xc5:
        case 0xc6: {
          v.kind = Kind::bin;
          const std::uint64_t n = read_be(1 << (b - 0xc4), "a binary length");
          v.bytes = read_bytes(n, "a binary", v);
          break;
        }
        case 0xc7:
        case 0xc8:
        case 0xc9:
          read_ext(v, read_be(1 << (b - 0xc7), "an ext length"));
          break;
        case 0xca:
          v.kind = Kind::float32;
          v.float_value = std::bit_cast<float>(static_cast<std::uint32_t>(read_be(4, "a float32")));
          break;
        case 0xcb:
          v.kind = Kind::float64;
          v.float_value = std::bit_cast<double>(read_be(8, "a float64"));
          break;
        case 0xcc:
        case 0xcd:
        case 0xce:
        case 0xcf:
          v.kind = Kind::uint_;
          v.uint_value = read_be(1 << (b - 0xcc), "an unsigned integer");
          break;
        case 0xd0:
        case 0xd1:
        case 0xd2:
        case 0xd3: {
          const int n = 1 << (b - 0xd0);
          const std::uint64_t raw = read_be(n, "a signed integer");
          // Sign-extend the n-byte two's complement value.
          const int shift = 64 - 8 * n;
          const auto value = static_cast<std::int64_t>(raw << shift) >> shift;
          if (value < 0) {
            v.kind = Kind::int_;
            v.int_value = value;
          } else {
            v.kind = Kind::uint_;
            v.uint_value = static_cast<std::uint64_t>(value);
          }
          break;
        }
        case 0xd4:
        case 0xd5:
        case 0xd6:
        case 0xd7:
        case 0xd8:
          read_ext(v, 1u << (b - 0xd4));
          break;
        case 0xd9:
        case 0xda:
        case 0xdb: {
          v.kind = Kind::str;
          const std::uint64_t n = read_be(1 << (b - 0xd9), "a string length");
          v.bytes = read_bytes(n, "a string", v);
          break;
        }
        case 0xdc:
        case 0xdd:
          v.kind = Kind::array;
          read_items(v, read_be(b == 0xdc ? 2 : 4, "an array length"), depth, "an array");
          break;
        case 0xde:
        case 0xdf: {
          v.kind = Kind::map;
          const std::uint64_t n = read_be(b == 0xde ? 2 : 4, "a map length");
          read_items(v, 2 * n, depth, "a map");
          break;
        }
        default:
          // Every byte value is covered above; keep the compiler's exhaustiveness honest.
          FLAXPP_ASSERT(false, "unhandled msgpack byte ", +b);
      }
    }
    return v;
  }

  std::string_view data_;
  const std::string& source_;
  std::size_t base_;
  std::size_t pos_ = 0;
  double values_bytes_ = 0;
  double next_check_ = 16 << 20;  // below this much, the available memory is not asked
};

}  // namespace

std::string describe(const Value& v) {
  switch (v.kind) {
    case Kind::nil:
      return "nil (Python None)";
    case Kind::boolean:
      return v.boolean ? "the boolean true" : "the boolean false";
    case Kind::int_:
      return detail::str("the integer ", v.int_value);
    case Kind::uint_:
      return detail::str("the integer ", v.uint_value);
    case Kind::float32:
    case Kind::float64:
      return detail::str("the float ", v.float_value);
    case Kind::str:
      return v.bytes.size() <= 40 ? detail::str("the string \"", v.bytes, "\"")
                                  : detail::str("a string of ", v.bytes.size(), " bytes");
    case Kind::bin:
      return detail::str("a binary of ", v.bytes.size(), " bytes");
    case Kind::array:
      return detail::str("an array of ", v.items.size(), " items");
    case Kind::map:
      return detail::str("a map of ", v.map_size(), " entries");
    case Kind::ext:
      return detail::str("an ext value of type ", +v.ext_type, " (", v.bytes.size(), " bytes)");
  }
  return "an unknown value";
}

Value decode(std::string_view data, const std::string& source, std::size_t base_offset) {
  return Reader(data, source, base_offset).read_document();
}

void Writer::put_be(std::uint64_t v, int n_bytes) {
  for (int i = n_bytes - 1; i >= 0; --i)
    put_byte(static_cast<std::uint8_t>(v >> (8 * i)));
}

void Writer::length(std::size_t n, std::uint8_t op8, std::uint8_t op16, std::uint8_t op32,
                    const char* what) {
  if (op8 != 0 && n <= 0xff) {
    put_byte(op8);
    put_be(n, 1);
  } else if (n <= 0xffff) {
    put_byte(op16);
    put_be(n, 2);
  } else if (n <= 0xffffffffu) {
    put_byte(op32);
    put_be(n, 4);
  } else {
    throw ValueError(detail::str("msgpack cannot hold ", what, " of ", n,
                                 " (the limit is 2^32 - 1); split the data"));
  }
}

void Writer::nil() {
  put_byte(0xc0);
}

void Writer::boolean(bool b) {
  put_byte(b ? 0xc3 : 0xc2);
}

void Writer::integer(std::int64_t i) {
  if (i >= 0) {
    uinteger(static_cast<std::uint64_t>(i));
  } else if (i >= -32) {
    put_byte(static_cast<std::uint8_t>(i));
  } else if (i >= std::numeric_limits<std::int8_t>::min()) {
    put_byte(0xd0);
    put_be(static_cast<std::uint64_t>(i), 1);
  } else if (i >= std::numeric_limits<std::int16_t>::min()) {
    put_byte(0xd1);
    put_be(static_cast<std::uint64_t>(i), 2);
  } else if (i >= std::numeric_limits<std::int32_t>::min()) {
    put_byte(0xd2);
    put_be(static_cast<std::uint64_t>(i), 4);
  } else {
    put_byte(0xd3);
    put_be(static_cast<std::uint64_t>(i), 8);
  }
}

void Writer::uinteger(std::uint64_t u) {
  if (u <= 0x7f) {
    put_byte(static_cast<std::uint8_t>(u));
  } else if (u <= 0xff) {
    put_byte(0xcc);
    put_be(u, 1);
  } else if (u <= 0xffff) {
    put_byte(0xcd);
    put_be(u, 2);
  } else if (u <= 0xffffffffu) {
    put_byte(0xce);
    put_be(u, 4);
  } else {
    put_byte(0xcf);
    put_be(u, 8);
  }
}

void Writer::float32(float f) {
  put_byte(0xca);
  put_be(std::bit_cast<std::uint32_t>(f), 4);
}

void Writer::float64(double d) {
  put_byte(0xcb);
  put_be(std::bit_cast<std::uint64_t>(d), 8);
}

void Writer::str(std::string_view s) {
  if (s.size() <= 31) {
    put_byte(static_cast<std::uint8_t>(0xa0 | s.size()));
  } else {
    length(s.size(), 0xd9, 0xda, 0xdb, "a string");
  }
  out_.append(s);
}

void Writer::bin(std::string_view b) {
  bin_header(b.size());
  out_.append(b);
}

void Writer::bin_header(std::size_t n) {
  length(n, 0xc4, 0xc5, 0xc6, "a binary");
}

void Writer::array_header(std::size_t n) {
  if (n <= 15) {
    put_byte(static_cast<std::uint8_t>(0x90 | n));
  } else {
    length(n, 0, 0xdc, 0xdd, "an array");
  }
}

void Writer::map_header(std::size_t n) {
  if (n <= 15) {
    put_byte(static_cast<std::uint8_t>(0x80 | n));
  } else {
    length(n, 0, 0xde, 0xdf, "a map");
  }
}

void Writer::ext(std::int8_t type, std::string_view payload) {
  ext_header(type, payload.size());
  out_.append(payload);
}

void Writer::ext_header(std::int8_t type, std::size_t n) {
  if (n == 1 || n == 2 || n == 4 || n == 8 || n == 16) {
    put_byte(static_cast<std::uint8_t>(0xd4 + std::countr_zero(n)));
  } else {
    length(n, 0xc7, 0xc8, 0xc9, "an ext payload");
  }
  put_byte(static_cast<std::uint8_t>(type));
}

}  // namespace flaxpp::io::msgpack
