// src/io/flax_msgpack.cpp — Trees <-> flax.serialization's msgpack layout (ExtType(1) arrays,
// chunked giant arrays); the wire format itself is io/msgpack.
#include "flaxpp/io/flax_msgpack.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "io/checkpoint_leaves.hpp"
#include "io/msgpack.hpp"

namespace flaxpp::io {
namespace {

namespace mp = msgpack;
namespace leaves = checkpoint_leaves;

// flax.serialization._MsgpackExtType.
constexpr std::int8_t kExtNdarray = 1;
constexpr std::int8_t kExtNativeComplex = 2;
constexpr std::int8_t kExtNpScalar = 3;
constexpr std::string_view kChunkedKey = "__msgpack_chunked_array__";

// _ndarray_to_bytes: packb((shape, dtype.name, arr.tobytes("C")), use_bin_type=True).
void write_ndarray(mp::Writer& out, const std::vector<std::int64_t>& dims, DType dtype,
                   std::string_view data) {
  // Everything but the data goes through a small buffer, so the data is copied only once.
  mp::Writer head;
  head.array_header(3);
  head.array_header(dims.size());
  for (const std::int64_t d : dims)
    head.integer(d);
  head.str(dtype_name(dtype));
  head.bin_header(data.size());
  out.ext_header(kExtNdarray, head.bytes().size() + data.size());
  out.raw(head.bytes());
  out.raw(data);
}

// _chunk: flat chunks of max(1, MAX_CHUNK_SIZE / itemsize) elements, keys in Flax's order.
void write_chunked(mp::Writer& out, const Array& array, std::string_view data,
                   std::int64_t max_chunk_bytes) {
  const auto item = static_cast<std::int64_t>(itemsize(array.dtype()));
  const std::int64_t chunk = std::max<std::int64_t>(1, max_chunk_bytes / item);
  const std::int64_t size = array.size();
  out.map_header(3);
  out.str(kChunkedKey);
  out.boolean(true);
  out.str("shape");
  out.map_header(array.shape().dims().size());
  for (std::size_t i = 0; i < array.shape().dims().size(); ++i) {
    out.str(std::to_string(i));
    out.integer(array.shape().dims()[i]);
  }
  out.str("chunks");
  const std::int64_t n_chunks = (size + chunk - 1) / chunk;
  out.map_header(static_cast<std::size_t>(n_chunks));
  for (std::int64_t c = 0; c < n_chunks; ++c) {
    const std::int64_t begin = c * chunk, len = std::min(chunk, size - begin);
    out.str(std::to_string(c));
    write_ndarray(
        out, {len}, array.dtype(),
        data.substr(static_cast<std::size_t>(begin * item), static_cast<std::size_t>(len * item)));
  }
}

void write_tree(mp::Writer& out, const Tree& tree, std::int64_t max_chunk_bytes) {
  if (tree.is_leaf()) {
    const Array array = tree.array().to(Device::cpu());
    const std::string_view data = leaves::raw_bytes(array);
    if (array.nbytes() > max_chunk_bytes) {
      write_chunked(out, array, data, max_chunk_bytes);
    } else {
      write_ndarray(out, array.shape().dims(), array.dtype(), data);
    }
    return;
  }
  out.map_header(tree.size());
  for (const auto& [key, value] : tree.items()) {
    out.str(key);
    write_tree(out, value, max_chunk_bytes);
  }
}

// The values of a decoded document, map keys included (its depth is bounded by the decoder).
std::size_t count_values(const mp::Value& v) {
  std::size_t n = 1;
  for (const mp::Value& item : v.items)
    n += count_values(item);
  return n;
}

// msgpack_restore's view of a decoded document, as a Tree.
class TreeReader {
 public:
  explicit TreeReader(const std::string& source) : source_(source) {}

  Tree read(const mp::Value& v, const std::string& path) {
    switch (v.kind) {
      case mp::Kind::map:
        for (std::size_t i = 0; i < v.map_size(); ++i)
          if (v.key(i).kind == mp::Kind::str && v.key(i).bytes == kChunkedKey)
            return Tree(read_chunked(v, path));
        return read_dict(v, path);
      case mp::Kind::array: {
        // A list or tuple Flax did not turn into a state dict: to_state_dict's {"0": ...}.
        // The keys "0", "1", ..., "10" are not in string order: the dict is sorted once.
        std::vector<std::pair<std::string, Tree>> items;
        items.reserve(v.items.size());
        for (std::size_t i = 0; i < v.items.size(); ++i) {
          std::string key = std::to_string(i);
          Tree item = read(v.items[i], leaves::join_path(path, key));
          items.emplace_back(std::move(key), std::move(item));
        }
        return Tree::from_items(std::move(items));
      }
      case mp::Kind::ext:
        return Tree(read_ext_array(v, path));
      case mp::Kind::boolean:
        return Tree(Array::scalar<bool>(v.boolean));
      case mp::Kind::uint_:
        if (v.uint_value <= static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()))
          return Tree(Array::scalar<std::int32_t>(static_cast<std::int32_t>(v.uint_value)));
        if (v.uint_value <= std::numeric_limits<std::uint32_t>::max())
          return Tree(Array::scalar<std::uint32_t>(static_cast<std::uint32_t>(v.uint_value)));
        fail(v, path,
             detail::str("the integer ", v.uint_value,
                         " fits neither int32 nor uint32; store it as an array of a "
                         "supported dtype (",
                         leaves::supported_names(), ")"));
      case mp::Kind::int_:
        if (v.int_value >= std::numeric_limits<std::int32_t>::min())
          return Tree(Array::scalar<std::int32_t>(static_cast<std::int32_t>(v.int_value)));
        fail(v, path, detail::str("the integer ", v.int_value, " does not fit int32"));
      case mp::Kind::float32:
        return Tree(Array::scalar<float>(static_cast<float>(v.float_value)));
      case mp::Kind::float64:
        return Tree(Array::scalar<double>(v.float_value));
      case mp::Kind::nil:
      case mp::Kind::str:
      case mp::Kind::bin:
        break;
    }
    fail(v, path,
         detail::str("found ", mp::describe(v),
                     ", but a flaxpp tree holds only arrays and dicts; remove the entry "
                     "from the state dict before flax.serialization.to_bytes"));
  }

 private:
  [[noreturn]] void fail(const mp::Value& v, const std::string& path,
                         const std::string& problem) const {
    throw ParseError(detail::str(source_, ": byte ", v.offset, " (at ", leaves::describe_path(path),
                                 "): ", problem));
  }

  std::string key_string(const mp::Value& key, const std::string& path) const {
    // msgpack_restore runs with strict_map_key=False: integer keys are allowed.
    if (key.kind == mp::Kind::str) return std::string(key.bytes);
    if (key.kind == mp::Kind::uint_) return std::to_string(key.uint_value);
    if (key.kind == mp::Kind::int_) return std::to_string(key.int_value);
    fail(key, path,
         detail::str("a map key is ", mp::describe(key), "; state dict keys are strings"));
  }

  // The entries are read in key order (each appended to the dict: linear time, whatever order
  // the file has them in).
  Tree read_dict(const mp::Value& v, const std::string& path) {
    std::vector<std::pair<std::string, std::size_t>> keys;  // (key, entry)
    keys.reserve(v.map_size());
    for (std::size_t i = 0; i < v.map_size(); ++i)
      keys.emplace_back(key_string(v.key(i), path), i);
    std::sort(keys.begin(), keys.end());
    const auto twice = std::adjacent_find(
        keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.first == b.first; });
    if (twice != keys.end())
      fail(v.key(std::next(twice)->second), path,
           detail::str("the key \"", twice->first, "\" appears twice in one map"));
    Tree t;
    for (auto& [key, i] : keys) {
      const std::string child = leaves::join_path(path, key);
      t.set(std::move(key), read(v.value(i), child));
    }
    return t;
  }

  // _dict_to_tuple: a map with the keys "0" ... "n-1" (or, leniently, a msgpack array).
  std::vector<const mp::Value*> sequence(const mp::Value& v, const std::string& path,
                                         const char* what) const {
    std::vector<const mp::Value*> out;
    if (v.kind == mp::Kind::array) {
      for (const mp::Value& item : v.items)
        out.push_back(&item);
      return out;
    }
    if (v.kind != mp::Kind::map)
      fail(v, path,
           detail::str(what, " of a chunked array is ", mp::describe(v),
                       "; expected a map with the keys \"0\", \"1\", ..."));
    out.assign(v.map_size(), nullptr);
    for (std::size_t i = 0; i < v.map_size(); ++i) {
      const std::string key = key_string(v.key(i), path);
      std::size_t index = 0;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
      if (ec != std::errc() || end != key.data() + key.size() || index >= out.size() ||
          out[index] != nullptr)
        fail(v.key(i), path,
             detail::str(what, " of a chunked array has the key \"", key,
                         "\"; expected the keys \"0\" to \"", out.size() - 1, "\" once each"));
      out[index] = &v.value(i);
    }
    return out;
  }

  const mp::Value& entry(const mp::Value& map, std::string_view key,
                         const std::string& path) const {
    for (std::size_t i = 0; i < map.map_size(); ++i)
      if (map.key(i).kind == mp::Kind::str && map.key(i).bytes == key) return map.value(i);
    fail(map, path,
         detail::str("a chunked array (\"", kChunkedKey, "\") has no \"", key,
                     "\" entry; the file is corrupt"));
  }

  // _unchunk: the chunks' elements concatenated and reshaped to "shape".
  Array read_chunked(const mp::Value& v, const std::string& path) {
    std::vector<std::int64_t> dims;
    for (const mp::Value* d : sequence(entry(v, "shape", path), path, "\"shape\"")) {
      if (d->kind != mp::Kind::uint_ ||
          d->uint_value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(*d, path,
             detail::str("a chunked array's dimension is ", mp::describe(*d),
                         "; expected an integer >= 0"));
      dims.push_back(static_cast<std::int64_t>(d->uint_value));
    }
    const Shape shape = make_shape(v, path, std::move(dims));
    const std::vector<const mp::Value*> chunks =
        sequence(entry(v, "chunks", path), path, "\"chunks\"");
    if (chunks.empty())
      fail(v, path, "a chunked array has no chunks (numpy cannot concatenate zero arrays either)");
    std::string data;
    DType dtype = DType::f32;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      const Array part = read_ext_array(*chunks[i], path);
      if (i > 0 && part.dtype() != dtype)
        fail(*chunks[i], path,
             detail::str("chunk ", i, " has dtype ", dtype_name(part.dtype()), ", chunk 0 has ",
                         dtype_name(dtype)));
      dtype = part.dtype();
      data += leaves::raw_bytes(part);  // read_ext_array returns host arrays
    }
    if (const std::string problem = leaves::check_raw(data, shape, dtype); !problem.empty())
      fail(v, path, "the chunks do not make up the array's shape: " + problem);
    return leaves::array_from_raw(data, shape, dtype);
  }

  Shape make_shape(const mp::Value& v, const std::string& path,
                   std::vector<std::int64_t> dims) const {
    try {
      return Shape(std::move(dims));
    } catch (const ValueError& e) {
      fail(v, path, detail::str("invalid shape: ", e.what()));
    }
  }

  // _ndarray_from_bytes: the ext payload is packb((shape, dtype_name, buffer)).
  Array read_ext_array(const mp::Value& v, const std::string& path) {
    if (v.kind != mp::Kind::ext || (v.ext_type != kExtNdarray && v.ext_type != kExtNpScalar))
      fail(v, path,
           detail::str("found ", mp::describe(v),
                       v.kind == mp::Kind::ext && v.ext_type == kExtNativeComplex
                           ? " (a Python complex number, which flaxpp does not support)"
                           : "",
                       "; Flax stores arrays as ext type 1 (ndarray) or 3 (numpy scalar)"));
    const mp::Value p = mp::decode(v.bytes, source_, v.bytes_offset);
    if (p.kind != mp::Kind::array || p.items.size() != 3)
      fail(p, path,
           detail::str("an array's payload is ", mp::describe(p),
                       "; expected [shape, dtype name, data]"));
    const mp::Value &jshape = p.items[0], &jname = p.items[1], &jdata = p.items[2];
    if (jshape.kind != mp::Kind::array)
      fail(jshape, path,
           detail::str("an array's shape is ", mp::describe(jshape),
                       "; expected an array of dimensions"));
    std::vector<std::int64_t> dims;
    for (const mp::Value& d : jshape.items) {
      if (d.kind != mp::Kind::uint_ ||
          d.uint_value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(d, path,
             detail::str("a dimension is ", mp::describe(d), "; expected an integer >= 0"));
      dims.push_back(static_cast<std::int64_t>(d.uint_value));
    }
    const Shape shape = make_shape(jshape, path, std::move(dims));
    if (jname.kind != mp::Kind::str && jname.kind != mp::Kind::bin)
      fail(jname, path,
           detail::str("an array's dtype name is ", mp::describe(jname),
                       "; expected a string such as \"float32\""));
    const std::string_view name = jname.bytes;
    DType dtype = DType::f32;
    bool known = false;
    for (const DType candidate : {DType::f32, DType::f64, DType::i32, DType::u32, DType::bool_}) {
      if (dtype_name(candidate) == name) {
        dtype = candidate;
        known = true;
      }
    }
    if (!known)
      fail(jname, path,
           detail::str("dtype \"", name, "\" is not supported; flaxpp checkpoints hold ",
                       leaves::supported_names(),
                       ". Convert in Flax before saving, e.g. jax.tree.map(lambda x: "
                       "x.astype(jnp.float32), state)"));
    if (jdata.kind != mp::Kind::bin && jdata.kind != mp::Kind::str)
      fail(jdata, path,
           detail::str("an array's data is ", mp::describe(jdata),
                       "; expected the raw bytes as a binary"));
    if (const std::string problem = leaves::check_raw(jdata.bytes, shape, dtype); !problem.empty())
      fail(jdata, path, problem + "; the file is corrupt");
    return leaves::array_from_raw(jdata.bytes, shape, dtype);
  }

  const std::string& source_;
};

}  // namespace

std::string to_flax_msgpack(const Tree& tree, std::int64_t max_chunk_bytes) {
  if (max_chunk_bytes < 1)
    throw ValueError(
        detail::str("to_flax_msgpack: max_chunk_bytes must be >= 1, got ", max_chunk_bytes));
  leaves::check_supported(tree, "msgpack");
  mp::Writer out;
  write_tree(out, tree, max_chunk_bytes);
  return out.take();
}

Tree from_flax_msgpack(std::string_view bytes, const std::string& source) {
  if (bytes.empty())
    throw ParseError(detail::str(source,
                                 ": the file is empty; a Flax msgpack checkpoint holds "
                                 "at least one msgpack value"));
  // Checked before decoding: another format (JSON, safetensors) fails here with a hint
  // rather than somewhere in the middle.
  const auto first = static_cast<std::uint8_t>(bytes[0]);
  const bool map_or_ext = (first & 0xf0) == 0x80 || first == 0xde || first == 0xdf ||
                          (first >= 0xc7 && first <= 0xc9) || (first >= 0xd4 && first <= 0xd8);
  if (!map_or_ext) {
    const char c = bytes[0];
    throw ParseError(detail::str(
        source, ": byte 0: the file starts with 0x", std::hex, +first, std::dec,
        c >= 0x20 && c < 0x7f ? detail::str(" ('", c, "')") : std::string(),
        ", which does not begin a msgpack map; a Flax checkpoint (flax.serialization.to_bytes) "
        "is a map of the state dict. Is the file in another format?"));
  }
  const mp::Value root = mp::decode(bytes, source);
  leaves::check_tree_memory(count_values(root), source, "msgpack values");  // each may be a leaf
  return TreeReader(source).read(root, "");
}

}  // namespace flaxpp::io
