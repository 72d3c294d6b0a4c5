// Progress of a long loop on stderr, the way tqdm and cargo show it: on a terminal a bar
// redrawn in place (at most 10 times a second); into a file or pipe a plain line every 10
// seconds, never a carriage-return frame per step. Lines other code prints to stdout interleave
// cleanly after clear().
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace flaxpp::cli {

class Progress {
 public:
  // A bar when `out` is a terminal, plain lines otherwise, nothing when `out` is null (the
  // other processes of a data-parallel job).
  explicit Progress(std::FILE* out = stderr);
  bool interactive() const { return interactive_; }
  // Shows `done` of `total` with a status text; shown now when `force` (e.g. an epoch's last
  // step), else only once the interval since the last display has passed.
  void update(const std::string& label, long long done, long long total, const std::string& status,
              bool force = false);
  // Erases a bar from the terminal (before other output); nothing for plain lines.
  void clear();

 private:
  std::FILE* out_;
  bool interactive_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace flaxpp::cli
