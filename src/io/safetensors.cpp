// src/io/safetensors.cpp — Trees <-> safetensors: the JSON header, the contiguous data section
// and the checks that keep a corrupt header from reading outside the file.
#include "flaxpp/io/safetensors.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <span>

#include "flaxpp/io/json.hpp"
#include "io/checkpoint_leaves.hpp"

namespace flaxpp::io {
namespace {

namespace leaves = checkpoint_leaves;

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::string_view kEmptyDictsKey = "flaxpp.empty_dicts";
// The reference implementation refuses larger headers too; a corrupt length must not make us
// allocate gigabytes.
constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

struct DTypeCode {
  DType dtype;
  std::string_view code;
};
constexpr std::array<DTypeCode, 5> kCodes{{{DType::f32, "F32"},
                                           {DType::f64, "F64"},
                                           {DType::i32, "I32"},
                                           {DType::u32, "U32"},
                                           {DType::bool_, "BOOL"}}};

std::string_view code_of(DType dtype) {
  for (const auto& c : kCodes)
    if (c.dtype == dtype) return c.code;
  FLAXPP_ASSERT(false, "check_supported let dtype ", dtype_name(dtype), " through");
  return {};
}

void collect(const Tree& tree, const std::string& path,
             std::vector<std::pair<std::string, Array>>& arrays,
             std::vector<std::string>& empty_dicts) {
  if (tree.is_leaf()) {
    arrays.emplace_back(path, tree.array());
    return;
  }
  if (tree.size() == 0 && !path.empty()) empty_dicts.push_back(path);
  for (const auto& [key, value] : tree.items()) {
    if (key.empty() || key.find('/') != std::string::npos)
      throw ValueError(detail::str("cannot save a safetensors checkpoint: the key \"", key,
                                   "\" in ", leaves::describe_path(path),
                                   " cannot be part of a tensor name (names are '/'-joined "
                                   "paths, so keys must be non-empty and contain no '/'); rename "
                                   "it or save as .json or .msgpack"));
    if (path.empty() && key == kMetadataKey)
      throw ValueError(detail::str("cannot save a safetensors checkpoint: the top-level key \"",
                                   kMetadataKey, "\" is reserved by the format; rename it"));
    collect(value, leaves::join_path(path, key), arrays, empty_dicts);
  }
}

// "a/b/c" -> {"a", "b", "c"}; nothing for a name with an empty component.
std::optional<std::vector<std::string>> split_path(const std::string& path) {
  std::vector<std::string> keys;
  for (std::size_t start = 0;;) {
    const std::size_t slash = path.find('/', start);
    keys.push_back(path.substr(start, slash - start));
    if (keys.back().empty()) return std::nullopt;
    if (slash == std::string::npos) return keys;
    start = slash + 1;
  }
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

// A tree path from the file (a tensor name, or an empty dict listed in the metadata) and what
// goes there.
struct Placed {
  std::string what;  // for messages: `tensor name "a/b"`
  std::vector<std::string> keys;
  Tree value;
};

class HeaderReader {
 public:
  explicit HeaderReader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw ParseError(detail::str(source_, ": ", problem));
  }

  std::uint64_t offset(const Json& j, const std::string& name) const {
    const auto v = integer_value(j);
    if (!v || *v < 0)
      fail(detail::str("tensor \"", name, "\": data_offsets holds ", describe_json(j),
                       "; expected integers >= 0"));
    return static_cast<std::uint64_t>(*v);
  }

  Entry entry(const std::string& name, const Json& j) const {
    if (!j.is_object())
      fail(detail::str("tensor \"", name, "\" is ", describe_json(j),
                       " in the header; expected {\"dtype\", \"shape\", \"data_offsets\"}"));
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!j.contains(key))
        fail(detail::str("tensor \"", name, "\" has no \"", key, "\" in the header"));
    Entry e{name, DType::f32, Shape(), 0, 0};
    const Json& jd = j["dtype"];
    const auto code = std::find_if(kCodes.begin(), kCodes.end(), [&](const DTypeCode& c) {
      return jd.is_string() && jd.get_ref<const std::string&>() == c.code;
    });
    if (code == kCodes.end())
      fail(detail::str("tensor \"", name, "\" has dtype ", describe_json(jd),
                       "; flaxpp checkpoints hold F32, F64, I32, U32 and BOOL tensors (convert "
                       "the tensor before saving)"));
    e.dtype = code->dtype;
    const Json& js = j["shape"];
    if (!js.is_array())
      fail(detail::str("tensor \"", name, "\" has shape ", describe_json(js), "; expected a list"));
    std::vector<std::int64_t> dims;
    for (const Json& d : js) {
      const auto v = integer_value(d);
      if (!v || *v < 0)
        fail(detail::str("tensor \"", name, "\" has the dimension ", describe_json(d),
                         "; expected an integer >= 0"));
      dims.push_back(*v);
    }
    try {
      e.shape = Shape(std::move(dims));
    } catch (const ValueError& err) {
      fail(detail::str("tensor \"", name, "\" has an invalid shape: ", err.what()));
    }
    const Json& jo = j["data_offsets"];
    if (!jo.is_array() || jo.size() != 2)
      fail(detail::str("tensor \"", name, "\" has data_offsets ", describe_json(jo),
                       "; expected [begin, end]"));
    e.begin = offset(jo[0], name);
    e.end = offset(jo[1], name);
    if (e.end < e.begin)
      fail(detail::str("tensor \"", name, "\" has data_offsets [", e.begin, ", ", e.end,
                       "] that end before they begin"));
    return e;
  }

  // `path` split at '/', checked for empty components and depth.
  Placed place(std::string what, const std::string& path, Tree value) const {
    auto keys = split_path(path);
    if (!keys)
      fail(detail::str(what, " has an empty path component (a leading, trailing or doubled '/')"));
    if (keys->size() > Tree::kMaxDepth)
      fail(detail::str(what, " has ", keys->size(), " '/'-separated parts; flaxpp reads trees ",
                       "nested at most ", Tree::kMaxDepth, " levels deep"));
    return {std::move(what), std::move(*keys), std::move(value)};
  }

  // Puts p.value at p.keys; the paths come in sorted order, so new keys are appended.
  void insert(Tree& tree, Placed p) const {
    const Tree* node = &tree;
    std::string prefix;
    for (std::size_t depth = 1; depth <= p.keys.size(); ++depth) {
      prefix = leaves::join_path(prefix, p.keys[depth - 1]);
      const std::span<const std::string> at(p.keys.data() + depth - 1, 1);
      node = node->find(at);
      if (node == nullptr) break;
      if (node->is_leaf() || depth == p.keys.size())
        fail(detail::str(p.what, " clashes with ",
                         node->is_leaf() ? "the tensor \"" : "the dict \"", prefix,
                         "\"; names are '/'-joined tree paths, and one path cannot be both an "
                         "array and a dict, nor be listed twice"));
    }
    tree.set_at(p.keys, std::move(p.value));
  }

 private:
  const std::string& source_;
};

}  // namespace

std::string to_safetensors(const Tree& tree) {
  if (tree.is_leaf())
    throw ValueError(
        "cannot save a safetensors checkpoint of a single array: tensors are named by their tree "
        "path, and the root has none; wrap it, e.g. Tree{{\"x\", array}}");
  leaves::check_supported(tree, "safetensors");
  std::vector<std::pair<std::string, Array>> arrays;
  std::vector<std::string> empty_dicts;
  collect(tree, "", arrays, empty_dicts);

  Json header = Json::object();
  Json metadata{{"format", "flaxpp.checkpoint/1"}};
  if (!empty_dicts.empty()) metadata[std::string(kEmptyDictsKey)] = Json(empty_dicts).dump();
  header[std::string(kMetadataKey)] = std::move(metadata);
  std::uint64_t data_bytes = 0;
  for (const auto& [name, array] : arrays) {
    const std::uint64_t begin = data_bytes;
    data_bytes += static_cast<std::uint64_t>(array.nbytes());
    header[name] = Json{{"dtype", code_of(array.dtype())},
                        {"shape", array.shape().dims()},
                        {"data_offsets", {begin, data_bytes}}};
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& e) {
    throw ValueError(detail::str("cannot save a safetensors checkpoint: ", e.what(),
                                 " (tensor names must be valid UTF-8)"));
  }
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size() + data_bytes);
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>(static_cast<std::uint64_t>(text.size()) >> (8 * i)));
  out += text;
  for (const auto& [name, array] : arrays)
    out += leaves::raw_bytes(array.to(Device::cpu()));
  return out;
}

Tree from_safetensors(std::string_view bytes, const std::string& source) {
  const HeaderReader reader(source);
  if (bytes.size() < 8)
    reader.fail(detail::str("truncated: the file has ", bytes.size(),
                            " bytes; a safetensors file starts with an 8-byte header length"));
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i)
    header_bytes =
        (header_bytes << 8) | static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)]);
  if (header_bytes > bytes.size() - 8)
    reader.fail(detail::str("truncated or not safetensors: the header length says ", header_bytes,
                            " bytes, but only ", bytes.size() - 8, " follow it"));
  if (header_bytes > kMaxHeaderBytes)
    reader.fail(detail::str("the header length ", header_bytes, " exceeds the ", kMaxHeaderBytes,
                            "-byte limit of safetensors; the file is corrupt"));
  const std::string_view text = bytes.substr(8, static_cast<std::size_t>(header_bytes));
  check_json_memory(text, detail::str(source, " (its header)"));
  Json header;
  try {
    header = Json::parse(text);
  } catch (const Json::exception& e) {
    reader.fail(detail::str("the ", header_bytes, "-byte header is not valid JSON (", e.what(),
                            "); the file is corrupt or not safetensors"));
  }
  if (!header.is_object())
    reader.fail(detail::str("the header is ", describe_json(header), "; expected a JSON object"));

  std::vector<Entry> entries;
  std::vector<std::string> empty_dicts;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      if (!value.is_object())
        reader.fail(detail::str("\"", kMetadataKey, "\" is ", describe_json(value),
                                "; expected an object of strings"));
      if (!value.contains(kEmptyDictsKey)) continue;
      Json paths;
      const Json& jp = value[std::string(kEmptyDictsKey)];
      const std::string listed = jp.is_string() ? jp.get<std::string>() : std::string();
      check_json_memory(listed, detail::str(source, " (its \"", kEmptyDictsKey, "\" metadata)"));
      try {
        paths = Json::parse(listed);
      } catch (const Json::exception&) {
        // Reported below with the other shapes of wrong value.
      }
      if (!paths.is_array() ||
          !std::all_of(paths.begin(), paths.end(), [](const Json& p) { return p.is_string(); }))
        reader.fail(detail::str("metadata \"", kEmptyDictsKey, "\" is ", describe_json(jp),
                                "; expected a string holding a JSON list of paths"));
      for (const Json& p : paths)
        empty_dicts.push_back(p.get<std::string>());
      continue;
    }
    entries.push_back(reader.entry(name, value));
  }

  // The tensors must tile the data section exactly: sorted by offset, each starts where the
  // previous ended, and the last ends at the end of the file.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const std::string_view data = bytes.substr(8 + static_cast<std::size_t>(header_bytes));
  std::uint64_t expected_begin = 0;
  for (const Entry& e : entries) {
    if (e.begin != expected_begin)
      reader.fail(detail::str("tensor \"", e.name, "\" has data_offsets [", e.begin, ", ", e.end,
                              "], but the previous tensor ends at ", expected_begin,
                              " (tensors must be contiguous and must not overlap); the header is "
                              "corrupt"));
    if (e.end > data.size())
      reader.fail(detail::str("truncated: tensor \"", e.name, "\" ends at data offset ", e.end,
                              ", but the data section has only ", data.size(), " bytes"));
    const std::string_view raw = data.substr(e.begin, e.end - e.begin);
    if (const std::string problem = leaves::check_raw(raw, e.shape, e.dtype); !problem.empty())
      reader.fail(detail::str("tensor \"", e.name, "\": ", problem));
    expected_begin = e.end;
  }
  if (expected_begin != data.size())
    reader.fail(detail::str("the tensors cover ", expected_begin, " bytes of the ", data.size(),
                            "-byte data section; the rest belongs to no tensor (corrupt header or "
                            "trailing garbage)"));

  // The tree is built from its paths in sorted order, so that every key is appended to its
  // dict (linear time) and a prefix comes before the paths below it.
  leaves::check_tree_memory(entries.size() + empty_dicts.size(), source, "tensors and empty dicts");
  std::vector<Placed> placed;
  placed.reserve(entries.size() + empty_dicts.size());
  for (const Entry& e : entries)
    placed.push_back(reader.place(
        detail::str("tensor name \"", e.name, "\""), e.name,
        leaves::array_from_raw(data.substr(e.begin, e.end - e.begin), e.shape, e.dtype)));
  for (const std::string& path : empty_dicts)
    placed.push_back(reader.place(
        detail::str("metadata \"", kEmptyDictsKey, "\" lists the path \"", path, "\", which"), path,
        Tree()));
  std::sort(placed.begin(), placed.end(),
            [](const Placed& a, const Placed& b) { return a.keys < b.keys; });
  Tree tree;
  for (Placed& p : placed)
    reader.insert(tree, std::move(p));
  return tree;
}

}  // namespace flaxpp::io
