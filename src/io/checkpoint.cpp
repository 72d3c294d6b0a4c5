// src/io/checkpoint.cpp — checkpoint files: the format by extension, the flaxpp JSON encoding,
// and the atomic write (temporary file, fsync, rename, directory fsync).
#include "flaxpp/io/checkpoint.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "flaxpp/core/host_memory.hpp"
#include "flaxpp/io/flax_msgpack.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/io/safetensors.hpp"
#include "io/checkpoint_leaves.hpp"

namespace flaxpp::io {
namespace {

constexpr std::string_view kJsonFormat = "flaxpp.checkpoint/1";

std::string json_encode(const Tree& tree) {
  checkpoint_leaves::check_supported(tree, "json");
  const Json j{{"format", kJsonFormat}, {"tree", tree_to_json(tree)}};
  try {
    return j.dump() + "\n";
  } catch (const Json::exception& e) {
    throw ValueError(detail::str("cannot save a json checkpoint: ", e.what(),
                                 " (dict keys must be valid UTF-8)"));
  }
}

Tree json_decode(const Json& j, const std::string& source) {
  if (!j.is_object() || !j.contains("format") || !j.contains("tree"))
    throw ParseError(detail::str(source, ": expected a checkpoint object {\"format\": \"",
                                 kJsonFormat, "\", \"tree\": ...}, got ", describe_json(j)));
  if (j["format"] != kJsonFormat)
    throw ParseError(detail::str(source, ": \"format\" is ", describe_json(j["format"]),
                                 "; expected \"", kJsonFormat,
                                 "\" (a flaxpp JSON checkpoint, as save_checkpoint writes it)"));
  try {
    return tree_from_json(j["tree"], "$.tree");
  } catch (const ParseError& e) {
    throw ParseError(detail::str(source, ": ", e.what()));
  }
}

[[noreturn]] void throw_write_error(const std::string& path, const std::string& step, int err,
                                    const std::string& hint) {
  throw Error(detail::str("cannot save '", path, "': ", step, " failed (", std::strerror(err), ")",
                          hint, "; '", path, "' was left as it was"));
}

// Closes a file descriptor it owns; the destructor never throws (a close error on the write
// path is checked explicitly before).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now and reports close()'s result (0 or -1 with errno set).
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

// Writes, fsyncs and closes `tmp`; on failure returns the failing step (errno is set).
const char* write_and_sync(const std::string& tmp, std::string_view bytes) {
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return "creating the temporary file";
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd.get(), bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return "writing the temporary file";
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::fsync(fd.get()) != 0) return "flushing the temporary file to disk (fsync)";
  if (fd.close() != 0) return "closing the temporary file";
  return nullptr;
}

}  // namespace

std::string_view checkpoint_format_name(CheckpointFormat format) {
  constexpr std::string_view kNames[] = {"json", "safetensors", "msgpack"};  // the enum's order
  return kNames[static_cast<std::size_t>(format)];
}

CheckpointFormat format_from_path(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".json") return CheckpointFormat::json;
  if (ext == ".safetensors") return CheckpointFormat::safetensors;
  if (ext == ".msgpack") return CheckpointFormat::msgpack;
  throw ValueError(
      detail::str("cannot tell the checkpoint format of '", path, "' from its extension \"", ext,
                  "\"; use .json (flaxpp JSON), .safetensors (safetensors) or .msgpack (Flax's "
                  "flax.serialization.to_bytes), or pass the format explicitly"));
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = detail::str(path, ".tmp-", ::getpid());
  if (const char* step = write_and_sync(tmp, bytes)) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_write_error(path, detail::str(step, " '", tmp, "'"), err,
                      "; check that the directory exists, is writable and has space");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_write_error(path, detail::str("renaming '", tmp, "' over it"), err,
                      err == EISDIR ? "; the path is a directory" : "");
  }
  // The rename is durable only once the directory entry is on disk.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  // Some file systems cannot fsync a directory (EINVAL): the rename is all they offer.
  if (dir_fd.get() < 0 || (::fsync(dir_fd.get()) != 0 && errno != EINVAL))
    throw Error(detail::str("saved '", path, "', but flushing its directory '", dir,
                            "' to disk failed (", std::strerror(errno),
                            "); the new file may not survive a power loss"));
}

std::vector<std::string> remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // The name write_file_atomically gives its temporary file, up to the pid.
  const std::string prefix = detail::str(target.filename().string(), ".tmp-");
  std::vector<std::string> removed;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string_view digits = std::string_view(name).substr(prefix.size());
    pid_t pid = 0;
    const auto [last, parse] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (parse != std::errc() || last != digits.data() + digits.size() || pid <= 0 ||
        pid == ::getpid())
      continue;
    // kill(pid, 0) probes without signalling: ESRCH is the only proof the writer is gone.
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code status_ec, remove_ec;
    if (!fs::is_regular_file(it->symlink_status(status_ec))) continue;
    if (fs::remove(it->path(), remove_ec)) removed.push_back(it->path().string());
  }
  return removed;
}

std::string encode_checkpoint(const Tree& tree, CheckpointFormat format) {
  switch (format) {
    case CheckpointFormat::json:
      return json_encode(tree);
    case CheckpointFormat::safetensors:
      return to_safetensors(tree);
    case CheckpointFormat::msgpack:
      return to_flax_msgpack(tree);
  }
  FLAXPP_ASSERT(false, "unknown checkpoint format");
  return {};
}

Tree decode_checkpoint(std::string_view bytes, CheckpointFormat format, const std::string& source) {
  switch (format) {
    case CheckpointFormat::json: {
      check_json_memory(bytes, source);
      Json j;
      try {
        j = Json::parse(bytes);
      } catch (const Json::exception& e) {
        throw ParseError(detail::str(source, ": not valid JSON (", e.what(),
                                     "); the file is truncated, corrupt or in another format"));
      }
      return json_decode(j, source);
    }
    case CheckpointFormat::safetensors:
      return from_safetensors(bytes, source);
    case CheckpointFormat::msgpack:
      return from_flax_msgpack(bytes, source);
  }
  FLAXPP_ASSERT(false, "unknown checkpoint format");
  return {};
}

void save_checkpoint(const std::string& path, const Tree& tree,
                     std::optional<CheckpointFormat> format) {
  // Encode completely before touching the file: an encoding error leaves it intact.
  const std::string bytes = encode_checkpoint(tree, format ? *format : format_from_path(path));
  write_file_atomically(path, bytes);
}

Tree load_checkpoint(const std::string& path, std::optional<CheckpointFormat> format) {
  const CheckpointFormat f = format ? *format : format_from_path(path);
  // JSON goes through read_json_file for its line:column syntax errors.
  if (f == CheckpointFormat::json) return json_decode(read_json_file(path), path);
  return decode_checkpoint(read_whole_file(path), f, path);
}

}  // namespace flaxpp::io
