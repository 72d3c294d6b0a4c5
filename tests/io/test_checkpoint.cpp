// Checkpoints: bit-exact round trips in flaxpp JSON, safetensors and Flax msgpack, a committed
// checkpoint written by real Flax, corrupt and truncated files, atomic writes, and training
// that resumes from a checkpoint exactly where it stopped.
#include <doctest/doctest.h>

#include <unistd.h>
#include "harness/errors.hpp"
#include "harness/temp_dir.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "flaxpp/io/checkpoint.hpp"
#include "flaxpp/io/flax_msgpack.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/io/safetensors.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "src/io/msgpack.hpp"

using namespace flaxpp;
using io::CheckpointFormat;
namespace fs = std::filesystem;

namespace {

constexpr CheckpointFormat kFormats[] = {CheckpointFormat::json, CheckpointFormat::safetensors,
                                         CheckpointFormat::msgpack};

const std::string kFixtures = std::string(FLAXPP_SOURCE_DIR) + "/tests/io/fixtures/";

using flaxpp::testing::has;
using flaxpp::testing::parse_error_of;
using flaxpp::testing::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

std::string ext(CheckpointFormat f) {
  std::string out = ".";  // not "." + string: g++ 12 warns falsely (-Wrestrict) on that
  out += io::checkpoint_format_name(f);
  return out;
}

template <class T>
Array vec(std::vector<T> v, Shape shape) {
  return Array::from_vector(v, std::move(shape));
}

// Every dtype, 0-d and empty arrays, nested and empty dicts, and the float values naive I/O
// breaks: NaN with a payload and sign, ±inf, -0.0, the smallest denormals, the extremes.
Tree special_tree() {
  using F = std::numeric_limits<float>;
  using D = std::numeric_limits<double>;
  const float nan_payload = std::bit_cast<float>(std::uint32_t{0xffc00123});
  return Tree{
      {"f32", vec<float>({0.1f, -0.0f, F::infinity(), -F::infinity(), F::quiet_NaN(), nan_payload,
                          F::denorm_min(), -F::denorm_min(), F::min() / 3, F::min(), F::max(),
                          F::lowest()},
                         Shape{3, 4})},
      {"f64", vec<double>({1.0 / 3, -0.0, D::infinity(), D::quiet_NaN(), D::denorm_min(), D::max(),
                           D::min()},
                          Shape{7})},
      {"i32", vec<std::int32_t>({std::numeric_limits<std::int32_t>::min(), -1, 0,
                                 std::numeric_limits<std::int32_t>::max()},
                                Shape{2, 2})},
      {"u32", vec<std::uint32_t>({0, 1, 0x80000000u, 0xffffffffu}, Shape{4})},
      {"bool", vec<bool>({true, false, false, true, true, false}, Shape{2, 1, 3})},
      {"scalars", Tree{{"f32", Array::scalar(2.5f)},
                       {"i32", Array::scalar(std::int32_t{-7})},
                       {"bool", Array::scalar(true)}}},
      {"empty",
       Tree{{"f32", vec<float>({}, Shape{0})}, {"i32", vec<std::int32_t>({}, Shape{2, 0, 3})}}},
      {"nested", Tree{{"a", Tree{{"b", Tree{{"c", Array::scalar(1.0)}}}}}}},
      {"empty_dict", Tree()},
      {"opt_state", Tree{{"0", Tree{{"count", Array::scalar(std::int32_t{3})}}}, {"1", Tree()}}},
  };
}

std::string raw(const Array& a) {
  const Array host = a.to(Device::cpu());
  return std::string(static_cast<const char*>(host.buffer().data()),
                     static_cast<std::size_t>(host.nbytes()));
}

bool same_bits_or_both_nan(const Array& got, const Array& want, bool nan_as_nan) {
  if (!nan_as_nan || !is_floating(want.dtype())) return raw(got) == raw(want);
  const auto compare = [](const auto& g, const auto& w) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      const bool both_nan = std::isnan(g[i]) && std::isnan(w[i]);
      if (!both_nan && std::memcmp(&g[i], &w[i], sizeof(g[i])) != 0) return false;
    }
    return true;
  };
  return want.dtype() == DType::f32 ? compare(got.to_vector<float>(), want.to_vector<float>())
                                    : compare(got.to_vector<double>(), want.to_vector<double>());
}

// Same structure (empty dicts included), dtypes, shapes and bits. JSON writes every NaN as
// "NaN": `nan_as_nan` accepts any NaN for a NaN.
void check_same(const Tree& got, const Tree& want, bool nan_as_nan = false,
                const std::string& path = "") {
  CAPTURE(path);
  REQUIRE(got.is_leaf() == want.is_leaf());
  if (want.is_leaf()) {
    CHECK(got.array().dtype() == want.array().dtype());
    REQUIRE(got.array().shape() == want.array().shape());
    CHECK(same_bits_or_both_nan(got.array(), want.array(), nan_as_nan));
    return;
  }
  REQUIRE(got.keys() == want.keys());
  for (const auto& [key, value] : want.items())
    check_same(got[key], value, nan_as_nan, path + "/" + key);
}

// Reads every proper prefix of `bytes` as the file `name`: each a ParseError whose message
// starts with the name, handed to check(length, message).
template <class Read, class Check>
void for_each_truncation(const std::string& bytes, const std::string& name, Read read,
                         Check check) {
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    CAPTURE(n);
    const std::string msg = parse_error_of([&] { read(bytes.substr(0, n), name); });
    CHECK(msg.starts_with(name + ": "));
    check(n, msg);
  }
}

}  // namespace

TEST_CASE(
    "checkpoint: every format round-trips every dtype bit-exactly (JSON: any NaN stays NaN)") {
  const TempDir dir;
  const Tree tree = special_tree();
  for (const CheckpointFormat f : kFormats) {
    CAPTURE(io::checkpoint_format_name(f));
    const std::string path = dir / ("ckpt" + ext(f));
    io::save_checkpoint(path, tree);
    check_same(io::load_checkpoint(path), tree, f == CheckpointFormat::json);
    // The explicit format wins over the extension.
    const std::string other = dir / ("ckpt" + ext(f) + ".bin");
    io::save_checkpoint(other, tree, f);
    check_same(io::load_checkpoint(other, f), tree, f == CheckpointFormat::json);
  }
  // JSON keeps -0.0's sign and the float32 denormals exactly.
  const Tree json = io::load_checkpoint(dir / "ckpt.json");
  const std::vector<float> f32 = json["f32"].array().to_vector<float>();
  CHECK(std::signbit(f32[1]));
  CHECK(f32[6] == std::numeric_limits<float>::denorm_min());
}

TEST_CASE("checkpoint: the format comes from the extension; others are a ValueError naming them") {
  CHECK(io::format_from_path("a/b.json") == CheckpointFormat::json);
  CHECK(io::format_from_path("w.safetensors") == CheckpointFormat::safetensors);
  CHECK(io::format_from_path("/x/state.msgpack") == CheckpointFormat::msgpack);
  CHECK_THROWS_WITH_AS(io::format_from_path("model.ckpt"),
                       doctest::Contains("use .json (flaxpp JSON), .safetensors (safetensors) or "
                                         ".msgpack"),
                       ValueError);
  CHECK_THROWS_AS(io::save_checkpoint("model", Tree()), ValueError);
}

TEST_CASE("Flax msgpack: a checkpoint written by Flax 0.12.8 loads to its expected values") {
  // python_compat/checkpoint_roundtrip.py --write-fixtures: an MLP 4 -> 8 -> 3 and its
  // optax.adam state after 3 steps, plus every dtype; the JSON holds the same values.
  const Tree expected = io::load_checkpoint(kFixtures + "flax_params.json");
  for (const char* name : {"flax_params.msgpack", "flax_params_chunked.msgpack"}) {
    CAPTURE(name);
    const Tree tree = io::load_checkpoint(kFixtures + name);
    check_same(tree, expected, /*nan_as_nan=*/true);
    CHECK(tree.at("params/params/Dense_0/kernel").array().shape() == Shape{4, 8});
    CHECK(tree.at("params/params/Dense_1/bias").array().shape() == Shape{3});
    CHECK(tree.at("opt_state/0/mu/params/Dense_0/kernel").array().shape() == Shape{4, 8});
    CHECK(tree.at("opt_state/0/count").array().to_vector<std::int32_t>() ==
          std::vector<std::int32_t>{3});
    CHECK(tree.at("opt_state/1").size() == 0);  // optax.EmptyState
    CHECK(tree["step"].array().dtype() == DType::i32);
    // np.float32(1.5), a numpy scalar: Flax's ExtType 3.
    CHECK(tree.at("dtype_cases/numpy_scalar").array().to_vector<float>() ==
          std::vector<float>{1.5f});
    // msgpack keeps NaN payloads: 0x7fc00123 and the negative NaN 0xffc00000.
    const std::vector<float> f32 = tree.at("dtype_cases/f32").array().to_vector<float>();
    CHECK(std::bit_cast<std::uint32_t>(f32[11]) == 0x7fc00123u);
    CHECK(std::bit_cast<std::uint32_t>(f32[12]) == 0xffc00000u);
  }
}

TEST_CASE("Flax msgpack: flaxpp writes the bytes flax.serialization.to_bytes writes") {
  // to_bytes({"a": jnp.array([1., 2.], jnp.float32),
  //           "b": {"c": jnp.int32(3), "d": jnp.array([True])}, "e": {}})
  const char flax[] =
      "\x83\xa1\x61\xc7\x15\x01\x93\x91\x02\xa7\x66\x6c\x6f\x61\x74\x33\x32\xc4\x08\x00\x00\x80"
      "\x3f\x00\x00\x00\x40\xa1\x62\x82\xa1\x63\xc7\x0e\x01\x93\x90\xa5\x69\x6e\x74\x33\x32\xc4"
      "\x04\x03\x00\x00\x00\xa1\x64\xc7\x0b\x01\x93\x91\x01\xa4\x62\x6f\x6f\x6c\xc4\x01\x01\xa1"
      "\x65\x80";
  const std::string expected(flax, sizeof(flax) - 1);
  const Tree tree{
      {"a", vec<float>({1.0f, 2.0f}, Shape{2})},
      {"b", Tree{{"c", Array::scalar(std::int32_t{3})}, {"d", vec<bool>({true}, Shape{1})}}},
      {"e", Tree()}};
  CHECK(io::to_flax_msgpack(tree) == expected);
  check_same(io::from_flax_msgpack(expected), tree);
}

TEST_CASE("Flax msgpack: arrays above the chunk limit use Flax's chunked layout and read back") {
  const Tree tree{{"w", vec<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, Shape{2, 5})},
                  {"small", vec<std::int32_t>({1, 2}, Shape{2})}};
  const std::string bytes = io::to_flax_msgpack(tree, /*max_chunk_bytes=*/16);
  check_same(io::from_flax_msgpack(bytes), tree);
  // {"__msgpack_chunked_array__": true, "shape": {"0": 2, "1": 5}, "chunks": {"0": [1..4],
  //  "1": [5..8], "2": [9, 10]}}: 4 float32 elements per chunk.
  const io::msgpack::Value root = io::msgpack::decode(bytes, "chunked");
  const io::msgpack::Value& w = root.value(1);
  REQUIRE(w.kind == io::msgpack::Kind::map);
  CHECK(w.key(0).bytes == "__msgpack_chunked_array__");
  CHECK(w.value(0).boolean);
  CHECK(w.key(1).bytes == "shape");
  CHECK(w.value(1).map_size() == 2);
  CHECK(w.key(2).bytes == "chunks");
  CHECK(w.value(2).map_size() == 3);
  CHECK(root.value(0).kind == io::msgpack::Kind::ext);  // 8 bytes: not chunked
  CHECK_THROWS_AS(io::to_flax_msgpack(tree, 0), ValueError);
}

TEST_CASE(
    "Flax msgpack: lists, integer keys and native scalars read as msgpack_restore reads them") {
  io::msgpack::Writer w;
  w.map_header(6);
  w.str("list");  // a raw list: flax's state-dict convention {"0": ..., "1": ...}
  w.array_header(2);
  w.integer(5);
  w.float32(0.5f);
  w.integer(7);  // an integer key (strict_map_key=False)
  w.float64(1.5);
  w.str("flag");
  w.boolean(true);
  w.str("neg");
  w.integer(-3);
  w.str("big");
  w.uinteger(4000000000u);  // beyond int32: uint32
  w.str("empty");
  w.map_header(0);
  const Tree t = io::from_flax_msgpack(w.bytes());
  CHECK(t.at("list/0").array().to_vector<std::int32_t>() == std::vector<std::int32_t>{5});
  CHECK(t.at("list/1").array().to_vector<float>() == std::vector<float>{0.5f});
  CHECK(t["7"].array().to_vector<double>() == std::vector<double>{1.5});
  CHECK(t["flag"].array().to_vector<bool>() == std::vector<bool>{true});
  CHECK(t["neg"].array().to_vector<std::int32_t>() == std::vector<std::int32_t>{-3});
  CHECK(t["big"].array().to_vector<std::uint32_t>() == std::vector<std::uint32_t>{4000000000u});
  CHECK(t["empty"].size() == 0);
  CHECK(t["big"].array().rank() == 0);
}

TEST_CASE("Flax msgpack: every truncation is a ParseError naming the file and the byte") {
  for_each_truncation(io::to_flax_msgpack(special_tree()), "c.msgpack", io::from_flax_msgpack,
                      [](std::size_t n, const std::string& msg) {
                        CHECK(has(msg, n == 0 ? "empty" : "truncated"));
                      });
}

namespace {
// A one-array Flax checkpoint {"x": ext1([shape, name, data])} with the parts given.
std::string flax_with(const std::function<void(io::msgpack::Writer&)>& payload, int ext_type = 1) {
  io::msgpack::Writer p, w;
  payload(p);
  w.map_header(1);
  w.str("x");
  w.ext(static_cast<std::int8_t>(ext_type), p.bytes());
  return w.take();
}
std::string array_payload(std::vector<std::int64_t> dims, const std::string& name,
                          const std::string& data) {
  return flax_with([&](io::msgpack::Writer& p) {
    p.array_header(3);
    p.array_header(dims.size());
    for (const auto d : dims)
      p.integer(d);
    p.str(name);
    p.bin(data);
  });
}
std::string flax_error(const std::string& bytes) {
  return parse_error_of([&] { io::from_flax_msgpack(bytes, "c.msgpack"); });
}
}  // namespace

TEST_CASE("Flax msgpack: corrupt files are ParseErrors that say what is wrong and where") {
  CHECK(array_payload({2}, "float32", std::string(8, '\0')).size() > 0);
  check_same(io::from_flax_msgpack(array_payload({2}, "float32", std::string(8, '\0'))),
             Tree{{"x", vec<float>({0, 0}, Shape{2})}});
  CHECK(flax_error(array_payload({2}, "int64", std::string(16, '\0'))) ==
        "c.msgpack: byte 9 (at 'x'): dtype \"int64\" is not supported; flaxpp checkpoints hold "
        "float32, float64, int32, uint32, bool. Convert in Flax before saving, e.g. "
        "jax.tree.map(lambda x: x.astype(jnp.float32), state)");
  CHECK(flax_error(array_payload({3}, "float32", std::string(8, '\0')))
            .find("the data has 8 bytes, but float32[3] needs 3 x 4 bytes; the file is corrupt") !=
        std::string::npos);
  CHECK(flax_error(array_payload({2}, "bool", "\x01\x02")).find("booleans are stored as 0 or 1") !=
        std::string::npos);
  CHECK(flax_error(array_payload({std::int64_t{1} << 40, std::int64_t{1} << 40}, "float32", ""))
            .find("invalid shape") != std::string::npos);
  CHECK(flax_error(flax_with([](io::msgpack::Writer& p) { p.float64(1.0); }, 2))
            .find("a Python complex number") != std::string::npos);
  CHECK(flax_error(flax_with([](io::msgpack::Writer& p) {
          p.array_header(2);
        })).find("truncated") != std::string::npos);
  io::msgpack::Writer w;
  w.map_header(2);
  w.str("none");
  w.nil();
  w.str("zone");
  w.nil();
  CHECK(flax_error(w.bytes()) ==
        "c.msgpack: byte 6 (at 'none'): found nil (Python None), but a flaxpp tree holds only "
        "arrays and dicts; remove the entry from the state dict before "
        "flax.serialization.to_bytes");
  io::msgpack::Writer dup;
  dup.map_header(2);
  dup.str("a");
  dup.map_header(0);
  dup.str("a");
  dup.map_header(0);
  CHECK(flax_error(dup.bytes()).find("the key \"a\" appears twice") != std::string::npos);
  io::msgpack::Writer chunked;
  chunked.map_header(1);
  chunked.str("__msgpack_chunked_array__");
  chunked.boolean(true);
  CHECK(flax_error(chunked.bytes()).find("has no \"shape\" entry") != std::string::npos);
  CHECK(flax_error("{\"format\": 1}") ==
        "c.msgpack: byte 0: the file starts with 0x7b ('{'), which does not begin a msgpack map; a "
        "Flax checkpoint (flax.serialization.to_bytes) is a map of the state dict. Is the file in "
        "another format?");
}

TEST_CASE("safetensors: the standard layout, tensors named by '/'-joined tree paths") {
  const Tree tree{{"params", Tree{{"w", vec<float>({1, 2}, Shape{1, 2})}}},
                  {"step", Array::scalar(std::int32_t{4})},
                  {"state", Tree{{"1", Tree()}}}};
  const std::string bytes = io::to_safetensors(tree);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)]);
  CHECK(n % 8 == 0);
  CHECK(8 + n + 12 == bytes.size());  // 8 bytes of f32[1,2] + 4 of i32[]
  const io::Json header = io::Json::parse(bytes.substr(8, n));
  CHECK(header["params/w"] ==
        io::Json::parse(R"({"dtype": "F32", "shape": [1, 2], "data_offsets": [0, 8]})"));
  CHECK(header["step"] ==
        io::Json::parse(R"({"dtype": "I32", "shape": [], "data_offsets": [8, 12]})"));
  CHECK(header["__metadata__"] == io::Json::parse(R"({"format": "flaxpp.checkpoint/1",
                                                       "flaxpp.empty_dicts": "[\"state/1\"]"})"));
  check_same(io::from_safetensors(bytes), tree);
  CHECK_THROWS_WITH_AS(io::to_safetensors(Tree{{"a/b", Array::scalar(1.0f)}}),
                       doctest::Contains("cannot be part of a tensor name"), ValueError);
  CHECK_THROWS_AS(io::to_safetensors(Tree(Array::scalar(1.0f))), ValueError);
}

namespace {
// A safetensors file with the given JSON header text and data section.
std::string safetensors_with(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>(static_cast<std::uint64_t>(header.size()) >> (8 * i)));
  return out + header + data;
}
std::string st_error(const std::string& header, const std::string& data) {
  return parse_error_of(
      [&] { io::from_safetensors(safetensors_with(header, data), "c.safetensors"); });
}
}  // namespace

TEST_CASE("safetensors: truncated and corrupt files are ParseErrors that say what is wrong") {
  for_each_truncation(io::to_safetensors(special_tree()), "c.safetensors", io::from_safetensors,
                      [](std::size_t, const std::string& msg) { CHECK(has(msg, "truncated")); });
  const std::string eight(8, '\0');
  CHECK(st_error(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                     "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                 eight + "xxxx")
            .find("tensor \"b\" has data_offsets [4, 8], but the previous tensor ends at 8") !=
        std::string::npos);
  CHECK(st_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", eight) ==
        "c.safetensors: the tensors cover 4 bytes of the 8-byte data section; the rest belongs to "
        "no tensor (corrupt header or trailing garbage)");
  CHECK(st_error(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", eight)
            .find("the data has 8 bytes, but float32[3] needs 3 x 4 bytes") != std::string::npos);
  CHECK(st_error(R"({"a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]}})", eight)
            .find("has dtype the string \"F16\"; flaxpp checkpoints hold F32, F64, I32, U32 and "
                  "BOOL") != std::string::npos);
  CHECK(st_error(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", eight)
            .find("end before they begin") != std::string::npos);
  CHECK(st_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                     "a/b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                 eight)
            .find("clashes with the tensor \"a\"") != std::string::npos);
  CHECK(st_error("{not json", "").find("header is not valid JSON") != std::string::npos);
  CHECK(parse_error_of([] {
          io::from_safetensors(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}");
        }).find("the header length says 9223372036854775807 bytes, but only 2 follow it") !=
        std::string::npos);
}

TEST_CASE("flaxpp JSON: truncated files and other JSON are ParseErrors naming the file") {
  const TempDir dir;
  const std::string good = io::encode_checkpoint(special_tree(), CheckpointFormat::json);
  const std::size_t last_brace = good.rfind('}');
  for (std::size_t n = 0; n < last_brace; n += 7) {
    CAPTURE(n);
    CHECK(parse_error_of([&] {
            io::decode_checkpoint(good.substr(0, n), CheckpointFormat::json, "c.json");
          }).starts_with("c.json: not valid JSON"));
  }
  write_bytes(dir / "refs.json", R"({"format": "flaxpp.refs/1", "tree": {}})");
  CHECK(parse_error_of([&] {
          io::load_checkpoint(dir / "refs.json");
        }).find("\"format\" is the string \"flaxpp.refs/1\"; expected \"flaxpp.checkpoint/1\"") !=
        std::string::npos);
  write_bytes(
      dir / "bad.json",
      R"({"format": "flaxpp.checkpoint/1", "tree": {"w": {"dtype": "float32", "shape": [2], "data": [1]}}})");
  CHECK(parse_error_of([&] {
          io::load_checkpoint(dir / "bad.json");
        }).starts_with(dir / "bad.json: $.tree.w.data: has 1 values, but shape [2] needs 2"));
  CHECK(parse_error_of([&] {
          io::load_checkpoint(dir / "missing.msgpack");
        }).find("cannot open the file for reading") != std::string::npos);
}

TEST_CASE("atomic write: a failed save leaves the old checkpoint intact and no temporary file") {
  const TempDir dir;
  const Tree good{{"w", vec<float>({1, 2, 3}, Shape{3})}};
  const Tree next{{"w", vec<float>({4, 5, 6}, Shape{3})}};
  for (const CheckpointFormat f : kFormats) {
    CAPTURE(io::checkpoint_format_name(f));
    const std::string path = dir / ("ckpt" + ext(f));
    io::save_checkpoint(path, good);
    const std::string before = read_bytes(path);

    // The temporary file cannot be created (a directory squats on its name).
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
    fs::create_directory(tmp);
    CHECK_THROWS_WITH_AS(io::save_checkpoint(path, next),
                         doctest::Contains("creating the temporary file"), Error);
    fs::remove(tmp);
    CHECK(read_bytes(path) == before);

    // Encoding fails before the file is touched (bfloat16 has no checkpoint encoding).
    const std::uint16_t one_bf16 = 0x3f80;
    const Tree bf16{{"w", Array::from_host_bytes(&one_bf16, Shape{}, DType::bf16, Device::cpu())}};
    CHECK_THROWS_WITH_AS(io::save_checkpoint(path, bf16), doctest::Contains("has dtype bfloat16"),
                         ValueError);
    CHECK(read_bytes(path) == before);

    // A corrupt checkpoint fails to load, so it is never written over a good one.
    write_bytes(dir / ("corrupt" + ext(f)), before.substr(0, before.size() / 2));
    CHECK_THROWS_AS(io::save_checkpoint(path, io::load_checkpoint(dir / ("corrupt" + ext(f)))),
                    ParseError);
    CHECK(read_bytes(path) == before);
    check_same(io::load_checkpoint(path), good);
  }

  // The directory does not exist: nothing is created anywhere.
  CHECK_THROWS_WITH_AS(io::write_file_atomically(dir / "no/such/dir/c.msgpack", "x"),
                       doctest::Contains("check that the directory exists"), Error);
  // The target is a directory: the rename fails and the temporary file is removed.
  fs::create_directory(dir / "taken.msgpack");
  CHECK_THROWS_WITH_AS(io::save_checkpoint(dir / "taken.msgpack", good),
                       doctest::Contains("the path is a directory"), Error);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path()))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"ckpt.json", "ckpt.msgpack", "ckpt.safetensors",
                                          "corrupt.json", "corrupt.msgpack", "corrupt.safetensors",
                                          "taken.msgpack"});

  if (::geteuid() != 0) {
    // A read-only directory (root ignores permissions, so only checked for other users).
    fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_THROWS_AS(io::save_checkpoint(dir / "ckpt.msgpack", next), Error);
    fs::permissions(dir.path(), fs::perms::owner_all);
    check_same(io::load_checkpoint(dir / "ckpt.msgpack"), good);
  }
}

TEST_CASE("atomic write: a temporary file left by a crash breaks neither loading nor saving") {
  const TempDir dir;
  const Tree good{{"w", vec<float>({1, 2}, Shape{2})}};
  const Tree next{{"w", vec<float>({3, 4}, Shape{2})}};
  for (const CheckpointFormat f : kFormats) {
    CAPTURE(io::checkpoint_format_name(f));
    const std::string path = dir / ("ckpt" + ext(f));
    io::save_checkpoint(path, good);
    // Half-written files from a crashed process and from an earlier run of this one.
    write_bytes(path + ".tmp-999999", "garbage from a crash");
    write_bytes(path + ".tmp-" + std::to_string(::getpid()), "garbage from an earlier run");
    check_same(io::load_checkpoint(path), good);
    io::save_checkpoint(path, next);
    check_same(io::load_checkpoint(path), next);
    CHECK(!fs::exists(path + ".tmp-" + std::to_string(::getpid())));
  }
}

TEST_CASE("checkpoint: adam training resumed from a checkpoint continues bit-identically") {
  const Array x = vec<float>(
      {0.5f, -1.0f, 2.0f, 0.1f, 0.3f, -0.7f, 1.5f, 0.0f, -0.2f, 0.9f, 1.1f, -1.3f}, Shape{4, 3});
  const Array y = vec<float>({1, 0, 0, 1, 1, 1, 0, 0}, Shape{4, 2});
  const optim::GradientTransformation tx = optim::adam(0.05);
  // One step on {"params", "opt_state", "step"}.
  const auto train_step = [&](const Tree& ckpt) {
    const Tree& params = ckpt["params"];
    const auto [loss, grads] = value_and_grad([&](const Tree& p) {
      return mean(square(matmul(x, p["w"].array()) + p["b"].array() - y));
    })(params);
    const auto [updates, opt_state] = tx.update(grads, ckpt["opt_state"], params);
    const std::int32_t step = ckpt["step"].array().to_vector<std::int32_t>()[0];
    return Tree{{"params", optim::apply_updates(params, updates)},
                {"opt_state", opt_state},
                {"step", Array::scalar(step + 1)}};
  };
  const Tree params{{"w", vec<float>({0.1f, -0.2f, 0.3f, 0.05f, -0.4f, 0.25f}, Shape{3, 2})},
                    {"b", vec<float>({0.0f, 0.01f}, Shape{2})}};
  Tree straight{{"params", params}, {"opt_state", tx.init(params)}, {"step", Array::scalar(0)}};
  for (int i = 0; i < 6; ++i)
    straight = train_step(straight);

  const TempDir dir;
  for (const CheckpointFormat f : kFormats) {
    CAPTURE(io::checkpoint_format_name(f));
    Tree resumed{{"params", params}, {"opt_state", tx.init(params)}, {"step", Array::scalar(0)}};
    for (int i = 0; i < 3; ++i)
      resumed = train_step(resumed);
    io::save_checkpoint(dir / ("train" + ext(f)), resumed);
    resumed = io::load_checkpoint(dir / ("train" + ext(f)));
    for (int i = 0; i < 3; ++i)
      resumed = train_step(resumed);
    check_same(resumed, straight);
  }
}

TEST_CASE("checkpoint: random byte corruption is a ParseError or a tree, never a crash") {
  // Seeded, so a failure reproduces; run under the sanitizer build to catch out-of-bounds reads.
  std::mt19937 rng(20240611);
  const Tree tree = special_tree();
  for (const CheckpointFormat f : kFormats) {
    CAPTURE(io::checkpoint_format_name(f));
    const std::string good = io::encode_checkpoint(tree, f);
    int rejected = 0;
    for (int trial = 0; trial < 2000; ++trial) {
      std::string bad = good;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < flips; ++i)
        bad[rng() % bad.size()] = static_cast<char>(rng());
      try {
        io::decode_checkpoint(bad, f, "fuzz");
      } catch (const ParseError& e) {
        ++rejected;
        CHECK(std::string(e.what()).starts_with("fuzz: "));
      }
    }
    // Flipped data bytes still decode (no format here has checksums); flipped structure must not.
    CHECK(rejected > 0);
  }
}
