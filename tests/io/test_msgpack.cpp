// The MessagePack wire codec under the checkpoint formats: smallest encodings as
// msgpack-python writes them, every wire type decoded, and bounds checks on hostile input.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <string>

#include "flaxpp/core/error.hpp"
#include "src/io/msgpack.hpp"

using namespace flaxpp;
namespace mp = flaxpp::io::msgpack;

namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values)
    out.push_back(static_cast<char>(v));
  return out;
}

std::string parse_error_of(const std::string& data) {
  try {
    mp::decode(data, "test.msgpack");
  } catch (const ParseError& e) {
    return e.what();
  }
  FAIL("expected a flaxpp::ParseError, nothing was thrown");
  return {};
}

}  // namespace

TEST_CASE("msgpack Writer: the bytes msgpack.packb(..., use_bin_type=True) writes") {
  // msgpack.packb([0, 127, 128, 255, 256, -1, -32, -33, -129, -32769, 65536, 2**32,
  //                -2**31 - 1, 1.5, "x" * 32, b"\x07" * 3, True, False, None, {"k": []}])
  const char python[] =
      "\xdc\x00\x14\x00\x7f\xcc\x80\xcc\xff\xcd\x01\x00\xff\xe0\xd0\xdf\xd1\xff\x7f\xd2\xff\xff"
      "\x7f\xff\xce\x00\x01\x00\x00\xcf\x00\x00\x00\x01\x00\x00\x00\x00\xd3\xff\xff\xff\xff\x7f"
      "\xff\xff\xff\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00\xd9\x20xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
      "\xc4\x03\x07\x07\x07\xc3\xc2\xc0\x81\xa1k\x90";
  mp::Writer w;
  w.array_header(20);
  for (const std::int64_t i : {0, 127, 128, 255, 256, -1, -32, -33, -129, -32769, 65536})
    w.integer(i);
  w.integer(std::int64_t{1} << 32);
  w.integer(std::int64_t{-2147483649});
  w.float64(1.5);
  w.str(std::string(32, 'x'));
  w.bin("\x07\x07\x07");
  w.boolean(true);
  w.boolean(false);
  w.nil();
  w.map_header(1);
  w.str("k");
  w.array_header(0);
  CHECK(w.bytes() == std::string(python, sizeof(python) - 1));
}

TEST_CASE("msgpack Writer: length forms switch at the spec's boundaries") {
  struct Case {
    std::size_t n;
    int str_op, bin_op, array_op, ext_op;
  };
  // fix / 8-bit / 16-bit / 32-bit forms; arrays have no 8-bit form; ext sizes 1, 2, 4, 8, 16
  // use fixext.
  for (const Case c : {Case{0, 0xa0, 0xc4, 0x90, 0xc7}, Case{1, 0xa1, 0xc4, 0x91, 0xd4},
                       Case{16, 0xb0, 0xc4, 0xdc, 0xd8}, Case{31, 0xbf, 0xc4, 0xdc, 0xc7},
                       Case{32, 0xd9, 0xc4, 0xdc, 0xc7}, Case{255, 0xd9, 0xc4, 0xdc, 0xc7},
                       Case{256, 0xda, 0xc5, 0xdc, 0xc8}, Case{65535, 0xda, 0xc5, 0xdc, 0xc8},
                       Case{65536, 0xdb, 0xc6, 0xdd, 0xc9}}) {
    CAPTURE(c.n);
    const std::string payload(c.n, 'z');
    mp::Writer s, b, a, e;
    s.str(payload);
    b.bin(payload);
    a.array_header(c.n);
    for (std::size_t i = 0; i < c.n; ++i)
      a.nil();
    e.ext(5, payload);
    CHECK(static_cast<std::uint8_t>(s.bytes()[0]) == c.str_op);
    CHECK(static_cast<std::uint8_t>(b.bytes()[0]) == c.bin_op);
    CHECK(static_cast<std::uint8_t>(a.bytes()[0]) == c.array_op);
    CHECK(static_cast<std::uint8_t>(e.bytes()[0]) == c.ext_op);
    const mp::Value sv = mp::decode(s.bytes(), "s"), bv = mp::decode(b.bytes(), "b"),
                    av = mp::decode(a.bytes(), "a"), ev = mp::decode(e.bytes(), "e");
    CHECK(sv.kind == mp::Kind::str);
    CHECK(sv.bytes == payload);
    CHECK(bv.kind == mp::Kind::bin);
    CHECK(bv.bytes == payload);
    CHECK(av.items.size() == c.n);
    CHECK(ev.kind == mp::Kind::ext);
    CHECK(ev.ext_type == 5);
    CHECK(ev.bytes == payload);
  }
}

TEST_CASE("msgpack: integers and floats of every width round-trip exactly") {
  const std::int64_t ints[] = {0,
                               1,
                               127,
                               128,
                               255,
                               256,
                               65535,
                               65536,
                               4294967295,
                               4294967296,
                               std::numeric_limits<std::int64_t>::max(),
                               -1,
                               -32,
                               -33,
                               -128,
                               -129,
                               -32768,
                               -32769,
                               std::numeric_limits<std::int32_t>::min(),
                               std::int64_t{std::numeric_limits<std::int32_t>::min()} - 1,
                               std::numeric_limits<std::int64_t>::min()};
  for (const std::int64_t i : ints) {
    CAPTURE(i);
    mp::Writer w;
    w.integer(i);
    const mp::Value v = mp::decode(w.bytes(), "int");
    if (i < 0) {
      CHECK(v.kind == mp::Kind::int_);
      CHECK(v.int_value == i);
    } else {
      CHECK(v.kind == mp::Kind::uint_);
      CHECK(v.uint_value == static_cast<std::uint64_t>(i));
    }
  }
  mp::Writer w;
  w.uinteger(std::numeric_limits<std::uint64_t>::max());
  CHECK(mp::decode(w.bytes(), "u64").uint_value == std::numeric_limits<std::uint64_t>::max());

  const float f = std::bit_cast<float>(std::uint32_t{0x7fc00123});  // NaN with a payload
  mp::Writer wf;
  wf.array_header(2);
  wf.float32(f);
  wf.float64(-0.0);
  const mp::Value v = mp::decode(wf.bytes(), "floats");
  CHECK(v.items[0].kind == mp::Kind::float32);
  CHECK(std::bit_cast<std::uint32_t>(static_cast<float>(v.items[0].float_value)) == 0x7fc00123u);
  CHECK(v.items[1].kind == mp::Kind::float64);
  CHECK(std::bit_cast<std::uint64_t>(v.items[1].float_value) == 0x8000000000000000u);
}

TEST_CASE("msgpack decode: non-minimal forms other writers use are read too") {
  // uint64 5, int8 +5, int16 -2, str16 "ab", array32 [nil], map32 {1: true}, fixext1 type -1,
  // ext8 of 3 bytes, float32 1.0
  const std::string data =
      bytes({0x99, 0xcf, 0,    0,   0,    0, 0, 0, 0, 5,    0xd0, 5,    0xd1, 0xff, 0xfe, 0xda,
             0,    2,    'a',  'b', 0xdd, 0, 0, 0, 1, 0xc0, 0xdf, 0,    0,    0,    1,    1,
             0xc3, 0xd4, 0xff, 9,   0xc7, 3, 7, 1, 2, 3,    0xca, 0x3f, 0x80, 0,    0});
  const mp::Value v = mp::decode(data, "forms");
  REQUIRE(v.items.size() == 9);
  CHECK(v.items[0].uint_value == 5);
  CHECK(v.items[1].kind == mp::Kind::uint_);  // a non-negative int8 is just an integer
  CHECK(v.items[1].uint_value == 5);
  CHECK(v.items[2].int_value == -2);
  CHECK(v.items[3].bytes == "ab");
  CHECK(v.items[4].items.size() == 1);
  CHECK(v.items[5].map_size() == 1);
  CHECK(v.items[5].key(0).uint_value == 1);
  CHECK(v.items[5].value(0).boolean);
  CHECK(v.items[6].ext_type == -1);
  CHECK(v.items[6].bytes == "\x09");
  CHECK(v.items[7].ext_type == 7);
  CHECK(v.items[7].bytes == "\x01\x02\x03");
  CHECK(v.items[7].bytes_offset == 39);
  CHECK(v.items[8].float_value == 1.0);
  CHECK(v.items[8].offset == 42);

  // Every proper prefix is truncated input, reported as such.
  for (std::size_t n = 0; n < data.size(); ++n) {
    CAPTURE(n);
    CHECK(parse_error_of(data.substr(0, n)).find("truncated") != std::string::npos);
  }
}

TEST_CASE("msgpack decode: hostile input is a ParseError naming the byte, never a crash") {
  CHECK(parse_error_of(bytes({0x92, 0x01, 0xc1})) ==
        "test.msgpack: byte 2: 0xc1 is a reserved msgpack byte (never valid); the data is corrupt");
  CHECK(parse_error_of(bytes({0x01, 0x02})).find("byte 1: 1 bytes follow the end") !=
        std::string::npos);
  // A 4-billion-element array in 6 bytes must not reserve memory for it.
  CHECK(parse_error_of(bytes({0xdd, 0xff, 0xff, 0xff, 0xff, 0x00})).find("cannot fit") !=
        std::string::npos);
  CHECK(parse_error_of(bytes({0xc6, 0x7f, 0xff, 0xff, 0xff, 0x00})).find("truncated: a binary") !=
        std::string::npos);
  CHECK(parse_error_of(std::string(300, '\x91')).find("nested more than 256 levels") !=
        std::string::npos);
  CHECK(parse_error_of("").find("byte 0: truncated") != std::string::npos);
}

TEST_CASE("msgpack decode: errors inside an ext payload name the byte in the whole file") {
  // Ext payloads are decoded on their own with base_offset = where they start. The count and
  // depth errors of arrays and maps added that offset twice.
  const auto error_at = [](const std::string& data, std::size_t base) {
    try {
      mp::decode(data, "f.msgpack", base);
    } catch (const ParseError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_at(bytes({0x92, 0x01}), 100)
            .starts_with("f.msgpack: byte 100: truncated: an array with 2 items cannot fit"));
  CHECK(error_at(std::string(300, '\x91'), 100)
            .starts_with("f.msgpack: byte 356: nested more than 256 levels"));
  CHECK(error_at(bytes({0xc1}), 100).starts_with("f.msgpack: byte 100: 0xc1"));
}
