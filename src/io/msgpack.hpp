// src/io/msgpack.hpp — a minimal MessagePack codec for the checkpoint formats: every wire type
// of the spec, read into a Value tree with a bounds check on every read, and a Writer that picks
// the smallest encoding as msgpack-python does. Not a general library: no timestamps, no streaming.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flaxpp::io::msgpack {

enum class Kind : std::uint8_t {
  nil,
  boolean,
  int_,
  uint_,
  float32,
  float64,
  str,
  bin,
  array,
  map,
  ext
};

// One decoded value. Strings, binaries and ext payloads are views into the decoded input, which
// must outlive the Value.
struct Value {
  Kind kind = Kind::nil;
  std::size_t offset = 0;  // byte offset of the value's first byte, for error messages
  bool boolean = false;
  std::int64_t int_value = 0;    // Kind::int_ (negative integers only)
  std::uint64_t uint_value = 0;  // Kind::uint_ (non-negative integers)
  double float_value = 0.0;      // Kind::float32 (exactly widened) and Kind::float64
  std::string_view bytes;        // str, bin and the ext payload
  std::size_t bytes_offset = 0;  // byte offset of `bytes` (ext payloads are decoded again)
  std::int8_t ext_type = 0;      // Kind::ext
  std::vector<Value> items;      // array: the elements; map: key, value, key, value, ...

  std::size_t map_size() const { return items.size() / 2; }
  const Value& key(std::size_t i) const { return items[2 * i]; }
  const Value& value(std::size_t i) const { return items[2 * i + 1]; }
};

// "a map of 3 entries", "the string \"abc\"", "ext type 1 (12 bytes)" — for error messages.
std::string describe(const Value& v);

// Decodes exactly one value spanning all of `data`. Offsets in the result and in errors are
// `base_offset` + the position in `data`. Throws ParseError "<source>: byte N: <problem>" for
// truncated input, reserved bytes (0xc1), nesting deeper than 256 levels and trailing bytes.
Value decode(std::string_view data, const std::string& source, std::size_t base_offset = 0);

class Writer {
 public:
  void nil();
  void boolean(bool b);
  void integer(std::int64_t i);
  void uinteger(std::uint64_t u);
  void float32(float f);
  void float64(double d);
  void str(std::string_view s);
  void bin(std::string_view b);
  void array_header(std::size_t n);
  void map_header(std::size_t n);
  void ext(std::int8_t type, std::string_view payload);
  // Headers alone, for a payload appended with raw() (large data is then copied only once).
  void bin_header(std::size_t n);
  void ext_header(std::int8_t type, std::size_t n);
  void raw(std::string_view bytes) { out_.append(bytes); }

  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void put_byte(std::uint8_t b) { out_.push_back(static_cast<char>(b)); }
  // Big-endian, as msgpack stores every multi-byte number.
  void put_be(std::uint64_t v, int n_bytes);
  // The 8/16/32-bit length forms of a header (an `op8` of 0: the type has no 8-bit form).
  void length(std::size_t n, std::uint8_t op8, std::uint8_t op16, std::uint8_t op32,
              const char* what);

  std::string out_;
};

}  // namespace flaxpp::io::msgpack
