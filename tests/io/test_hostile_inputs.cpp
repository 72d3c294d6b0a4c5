// Issue 15's hostile inputs to the readers: files that loaded in quadratic time, crashed on a
// malformed train state or nested too deep for the stack, and sizes that asked for more memory
// than the machine has. Each must load quickly, or be refused with an error naming the input.
#include <doctest/doctest.h>

#include "harness/errors.hpp"
#include "harness/host_memory_limit.hpp"
#include "harness/temp_dir.hpp"

#include <cstdlib>
#include <string>

#include "flaxpp/core/host_memory.hpp"
#include "flaxpp/io/checkpoint.hpp"
#include "flaxpp/io/flax_msgpack.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/io/safetensors.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/optim/transform.hpp"
#include "src/tools/mlp_apply.hpp"
#include "flaxpp/train/train_state.hpp"
#include "src/io/msgpack.hpp"

using namespace flaxpp;
using flaxpp::testing::has;
using flaxpp::testing::HostMemoryLimit;
using flaxpp::testing::parse_error_of;
using io::CheckpointFormat;
namespace mp = flaxpp::io::msgpack;

namespace {

constexpr CheckpointFormat kFormats[] = {CheckpointFormat::json, CheckpointFormat::safetensors,
                                         CheckpointFormat::msgpack};

// {"x": [0, 0, ...]}: `n` one-byte items in one msgpack array.
std::string msgpack_array_of_zeros(std::size_t n) {
  mp::Writer w;
  w.map_header(1);
  w.str("x");
  w.array_header(n);
  std::string out = w.take();
  out.append(n, '\0');
  return out;
}

Array empty_i32() {
  return Array::from_vector(std::vector<std::int32_t>{}, Shape{0});
}

// A train state of a 2 -> 3 MLP and adam's state, as the CLI checkpoints it.
const optim::GradientTransformation kAdam = optim::adam(0.1);

Tree train_state_tree() {
  const Tree params{{"Dense_0", Tree{{"kernel", Array::full(Shape{2, 3}, 0.5, DType::f32)},
                                     {"bias", Array::full(Shape{3}, 0.0, DType::f32)}}}};
  return train::TrainState{params, kAdam.init(params), 7}.to_tree();
}

// `tree` with the leaf at `path` replaced.
Tree with_leaf(const Tree& tree, const std::string& path, const Array& leaf) {
  Tree out;
  for (const auto& [p, a] : tree.flatten()) {
    std::vector<std::string> keys;
    for (std::size_t start = 0;;) {
      const std::size_t slash = p.find('/', start);
      keys.push_back(p.substr(start, slash - start));
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    out.set_at(keys, p == path ? leaf : a);
  }
  return out;
}

}  // namespace

TEST_CASE("Flax msgpack: a 200 KB array of small items loads in linear time (was 64 s)") {
  const std::size_t n = 200000;
  const Tree t = io::from_flax_msgpack(msgpack_array_of_zeros(n), "big.msgpack");
  REQUIRE(t["x"].size() == n);
  CHECK(t.at("x/199999").array().to_vector<std::int32_t>() == std::vector<std::int32_t>{0});
}

TEST_CASE("Flax msgpack: a map of 100k keys in descending order loads in linear time (was 33 s)") {
  const int n = 100000;
  mp::Writer w;
  w.map_header(static_cast<std::size_t>(n));
  for (int i = n - 1; i >= 0; --i) {
    w.str(std::to_string(1000000 + i));
    w.integer(i);
  }
  const Tree t = io::from_flax_msgpack(w.bytes(), "descending.msgpack");
  REQUIRE(t.size() == static_cast<std::size_t>(n));
  CHECK(t.keys().front() == "1000000");
  CHECK(t["1099999"].array().to_vector<std::int32_t>() == std::vector<std::int32_t>{n - 1});
}

TEST_CASE("safetensors: 100k tensors save and load back in linear time (was 22 s)") {
  std::vector<std::pair<std::string, Tree>> layers;
  for (int i = 0; i < 100000; ++i)
    layers.emplace_back(std::to_string(i), Tree{{"w", Array::scalar(static_cast<float>(i))}});
  const Tree tree{{"layers", Tree::from_items(std::move(layers))}};
  const Tree back = io::from_safetensors(io::to_safetensors(tree), "many.safetensors");
  REQUIRE(back["layers"].size() == 100000);
  CHECK(back.at("layers/99999/w").array().to_vector<float>() == std::vector<float>{99999.0f});
}

TEST_CASE(
    "safetensors: a tensor named by 20,000 '/'-separated parts is a ParseError, not a "
    "stack overflow") {
  std::string name = "a";
  for (int i = 1; i < 20000; ++i)
    name += "/a";
  const std::string header =
      R"({")" + name + R"(": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}})";
  std::string file;
  for (int i = 0; i < 8; ++i)
    file.push_back(static_cast<char>(static_cast<std::uint64_t>(header.size()) >> (8 * i)));
  file += header + std::string(4, '\0');
  const std::string msg = parse_error_of([&] { io::from_safetensors(file, "deep.safetensors"); });
  CHECK(msg.starts_with("deep.safetensors: tensor name \"a/a/a/"));
  CHECK(has(msg, "has 20000 '/'-separated parts; flaxpp reads trees nested at most 256 levels"));
}

TEST_CASE("tree_from_json: a tree nested deeper than Tree::kMaxDepth is a ParseError") {
  io::Json j = io::Json::object();
  for (std::size_t i = 0; i <= Tree::kMaxDepth; ++i)
    j = io::Json{{"a", std::move(j)}};
  const std::string msg = parse_error_of([&] { io::tree_from_json(j); });
  CHECK(has(msg, "the tree is nested more than 256 levels deep"));
}

TEST_CASE(
    "TrainState: a step of shape [0] in any checkpoint format is a clear error, not a crash") {
  const Tree bad = with_leaf(train_state_tree(), "step", empty_i32());
  for (const CheckpointFormat f : kFormats) {
    CAPTURE(io::checkpoint_format_name(f));
    const Tree loaded = io::decode_checkpoint(io::encode_checkpoint(bad, f), f, "c");
    CHECK_THROWS_WITH_AS(train::TrainState::from_tree(loaded),
                         "a train-state checkpoint's \"step\" must be an int32 scalar (shape []) "
                         ">= 0, got i32[0]; the checkpoint is corrupt or is not a train state",
                         ValueError);
  }
  CHECK_THROWS_WITH_AS(
      train::TrainState::from_tree(with_leaf(train_state_tree(), "step", Array::scalar(-1))),
      doctest::Contains("\"step\" must be an int32 scalar (shape []) >= 0, got -1"), ValueError);
  CHECK_THROWS_WITH_AS(
      train::TrainState::from_tree(with_leaf(train_state_tree(), "step", Array::scalar(1.5f))),
      doctest::Contains("got f32[]"), ValueError);
  CHECK(train::TrainState::from_tree(train_state_tree()).step == 7);
}

TEST_CASE(
    "ClassifierStep::restore: an adam count of shape [0] is refused naming its path; "
    "scale_by_adam refuses it too instead of crashing") {
  const Tree bad = with_leaf(train_state_tree(), "opt_state/0/count", empty_i32());
  const train::ClassifierStep step(
      train::mlp_apply(nn::MLP{.features = {3}}, checkpoint_policies::none()), kAdam);
  for (const CheckpointFormat f : kFormats) {
    CAPTURE(io::checkpoint_format_name(f));
    const Tree loaded = io::decode_checkpoint(io::encode_checkpoint(bad, f), f, "c");
    CHECK_THROWS_WITH_AS(step.restore(loaded),
                         "optimiser state 'opt_state/0/count': expected i32[], got i32[0]; the "
                         "checkpoint is corrupt or was written for other parameters",
                         ValueError);
  }
  const train::TrainState state = train::TrainState::from_tree(bad);
  CHECK_THROWS_WITH_AS(kAdam.update(state.params, state.opt_state, state.params),
                       doctest::Contains("optimiser state \"count\": expected int32[]"),
                       ValueError);
  CHECK(step.restore(train_state_tree()).step == 7);
}

TEST_CASE(
    "optim::check_state: missing, extra and reshaped leaves are named with what was "
    "expected") {
  const Tree params{{"w", Array::full(Shape{2}, 1.0, DType::f32)}};
  const Tree good = kAdam.init(params);
  CHECK_NOTHROW(optim::check_state(kAdam, params, good));
  CHECK_THROWS_WITH_AS(optim::check_state(kAdam, params, optim::sgd(0.1, 0.9).init(params)),
                       doctest::Contains("optimiser state 'opt_state/0/count' is missing"),
                       ValueError);
  Tree extra = good;
  extra.set("2", Tree{{"trace", Array::full(Shape{2}, 0.0, DType::f32)}});
  CHECK_THROWS_WITH_AS(optim::check_state(kAdam, params, extra),
                       doctest::Contains("'opt_state/2/trace' (f32[2]) is not part of"),
                       ValueError);
  CHECK_THROWS_WITH_AS(
      optim::check_state(kAdam, params,
                         with_leaf(good, "0/mu/w", Array::full(Shape{3}, 0.0, DType::f32))),
      doctest::Contains("'opt_state/0/mu/w': expected f32[2], got f32[3]"), ValueError);
}

TEST_CASE("readers refuse, naming the input, what needs more than the host memory available") {
  const flaxpp::testing::TempDir dir;
  const HostMemoryLimit limit(1 << 20);  // 1 MB
  // A 2 MB msgpack array: 2M decoded values of ~100 bytes each.
  const std::string msg = parse_error_of(
      [] { io::from_flax_msgpack(msgpack_array_of_zeros(2000000), "huge.msgpack"); });
  CHECK(msg == detail::str("huge.msgpack: byte 3: decoding 2000002 values (", sizeof(mp::Value),
                           " bytes each) needs ", format_bytes(2000002.0 * sizeof(mp::Value)),
                           " of host memory, but 1.05 MB are available"));
  // 20k values decode in 2 MB, but their tree needs more.
  CHECK(has(
      parse_error_of([] { io::from_flax_msgpack(msgpack_array_of_zeros(20000), "wide.msgpack"); }),
      "wide.msgpack: the tree of its 20003 msgpack values needs 6.40 MB of host memory"));
  // A file larger than the memory is not read at all.
  const std::string big = dir.write("big.json", std::string(2 << 20, ' '));
  CHECK(has(parse_error_of([&] { io::read_json_file(big); }),
            "big.json: the file is 2.10 MB; reading it needs 2.10 MB of host memory, but 1.05 MB "
            "are available"));
  // 200 kB of JSON text that parses to several MB.
  std::string zeros = "[0";
  for (int i = 0; i < 100000; ++i)
    zeros += ",0";
  zeros += "]";
  CHECK(has(parse_error_of([&] { io::check_json_memory(zeros, "zeros.json"); }),
            "zeros.json: parsing its 200 kB of JSON needs"));
  CHECK(parse_error_of([&] { read_whole_file(dir.path().string()); }) ==
        dir.path().string() + ": is a directory; expected a file");
  // The same texts load once the memory is there.
  ::unsetenv("FLAXPP_HOST_MEMORY_LIMIT");
  CHECK_NOTHROW(io::check_json_memory(zeros, "zeros.json"));
  CHECK(available_host_memory() > (1u << 20));
}
