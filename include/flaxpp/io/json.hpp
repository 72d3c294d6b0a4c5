// flaxpp/io/json.hpp — arrays and trees as JSON in the flaxpp.refs/1 encoding:
// {"dtype": "float32", "shape": [2, 3], "data": [...row-major...]}, non-finite floats as the
// strings "NaN", "Infinity", "-Infinity"; a tree is a JSON object of such arrays or objects.
// Readers throw ParseError naming the JSON path ($.cases[3].inputs.x.data[5]) and what was
// expected there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/tree.hpp"

namespace flaxpp::io {

using Json = nlohmann::json;

// Reads an array; values are rounded to the declared dtype (float32 data to float32).
Array array_from_json(const Json& j, const std::string& path = "$");
Json array_to_json(const Array& array);

// Whether `j` looks like an encoded array (an object with exactly dtype, shape and data).
bool is_array_json(const Json& j);
// Reads a tree: encoded arrays are leaves, other objects are dicts.
Tree tree_from_json(const Json& j, const std::string& path = "$");
Json tree_to_json(const Tree& tree);

// Parses a whole JSON file; a syntax error is a ParseError naming the file, line and column.
Json read_json_file(const std::string& filename);
// Parses JSON text the same way; `source` (e.g. a file name) starts the error message.
Json parse_json(std::string_view text, const std::string& source);

// A ParseError starting with `source` when the parsed form of `text` would need more host
// memory than is available (nlohmann::json takes up to about 30 times the text; the exact need
// is counted in a first pass only for text that large). Call it before Json::parse.
void check_json_memory(std::string_view text, const std::string& source);

// The integer a JSON number denotes when it is an integer within int64 — or, with
// allow_integral_float, a float with an integral value such as 3.0 — else nothing.
std::optional<std::int64_t> integer_value(const Json& v, bool allow_integral_float = false);

// Whether arrays and objects in `j` nest more than `max_depth` levels (found without recursion:
// nlohmann's dump, copy and comparison recurse once per level, so hostile input must be checked
// before it meets them).
bool nested_deeper_than(const Json& j, std::size_t max_depth);

// Describes a JSON value for error messages: `a string "abc"`, `the number 3.5`, `an object`.
std::string describe_json(const Json& j);

}  // namespace flaxpp::io
