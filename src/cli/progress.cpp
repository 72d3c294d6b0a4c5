// Progress display: a bar on a terminal, periodic plain lines elsewhere.
#include "cli/progress.hpp"

#include <unistd.h>

namespace flaxpp::cli {
namespace {
constexpr std::chrono::milliseconds kBarInterval{100};
constexpr std::chrono::seconds kLineInterval{10};
}  // namespace

Progress::Progress(std::FILE* out)
    : out_(out),
      interactive_(out != nullptr && ::isatty(::fileno(out)) == 1),
      last_(std::chrono::steady_clock::now()) {}

void Progress::update(const std::string& label, long long done, long long total,
                      const std::string& status, bool force) {
  if (out_ == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  if (interactive_) {
    if (!force && shown_ && now - last_ < kBarInterval) return;
    const long long filled = total > 0 ? 20 * done / total : 20;
    std::fprintf(out_, "\r%s [%s%s] %lld/%lld %s\033[K", label.c_str(),
                 std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(20 - filled), '.').c_str(), done, total,
                 status.c_str());
  } else {
    // The first line after one interval, not at once: a short run prints none.
    if (now - last_ < kLineInterval) return;
    std::fprintf(out_, "%s %lld/%lld %s\n", label.c_str(), done, total, status.c_str());
  }
  std::fflush(out_);
  shown_ = true;
  last_ = now;
}

void Progress::clear() {
  if (interactive_ && shown_) {
    std::fprintf(out_, "\r\033[K");
    std::fflush(out_);
    shown_ = false;
  }
}

}  // namespace flaxpp::cli
