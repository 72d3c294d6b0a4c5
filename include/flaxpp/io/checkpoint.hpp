// flaxpp/io/checkpoint.hpp — checkpoints: a Tree (e.g. {"params", "opt_state", "step"}) saved
// atomically to and loaded from flaxpp JSON, safetensors or Flax's msgpack, chosen by extension.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flaxpp/core/tree.hpp"

namespace flaxpp::io {

// A checkpoint's file format:
//   json         {"format": "flaxpp.checkpoint/1", "tree": <tree_to_json(tree)>}; every finite
//                float round-trips bit-exactly, NaN is written as "NaN" (payload and sign lost);
//   safetensors  the Hugging Face format; tensors are named by their '/'-joined tree path
//                ("params/Dense_0/kernel"), see flaxpp/io/safetensors.hpp;
//   msgpack      flax.serialization.to_bytes / msgpack_restore, see flaxpp/io/flax_msgpack.hpp.
enum class CheckpointFormat { json, safetensors, msgpack };

// "json", "safetensors", "msgpack".
std::string_view checkpoint_format_name(CheckpointFormat format);
// The format named by the path's extension (.json, .safetensors, .msgpack); throws ValueError
// listing them for any other extension.
CheckpointFormat format_from_path(const std::string& path);

// Replaces `path` with `bytes` so that a reader (or a crash) sees the old file or the new one,
// never a mix: writes `path + ".tmp-<pid>"`, fsyncs it, renames it over `path` and fsyncs the
// directory. On any failure the temporary file is removed, `path` is left as it was, and an
// Error naming the file, the failing step and the system's reason is thrown. Two threads of
// one process must not write the same path at once (they would share the temporary name).
void write_file_atomically(const std::string& path, std::string_view bytes);

// Removes the temporary files write_file_atomically(path, ...) left behind when its process was
// killed mid-write: regular files named `path + ".tmp-<pid>"` whose process no longer exists
// (another process's, or one that may be alive, e.g. under another user, is left alone; so is
// this process's own). Returns the paths removed; a directory that cannot be read is skipped.
std::vector<std::string> remove_stale_temporaries(const std::string& path);

// The bytes of a checkpoint in `format`. Leaves must be concrete float32, float64, int32,
// uint32 or bool arrays (ValueError naming the leaf otherwise); every format keeps empty
// dicts (e.g. optax's EmptyState, {}).
std::string encode_checkpoint(const Tree& tree, CheckpointFormat format);
// Decodes checkpoint bytes; `source` (the file name) starts every ParseError message.
Tree decode_checkpoint(std::string_view bytes, CheckpointFormat format, const std::string& source);

// Encodes `tree` (the format defaults to the extension's) and writes it with
// write_file_atomically: an encoding error or a failed write leaves an existing file intact.
void save_checkpoint(const std::string& path, const Tree& tree,
                     std::optional<CheckpointFormat> format = {});
// Reads a checkpoint (the format defaults to the extension's) into host arrays. A truncated
// or corrupt file is a ParseError naming the file and the problem (with the byte offset for
// the binary formats).
Tree load_checkpoint(const std::string& path, std::optional<CheckpointFormat> format = {});

}  // namespace flaxpp::io
