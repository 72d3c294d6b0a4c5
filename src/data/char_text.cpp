// CharText of flaxpp/data/char_text.hpp: one pass for the vocabulary, then positioned reads of
// the sequences each batch gathers. Host code only (POSIX file descriptors).
#include "flaxpp/data/char_text.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "flaxpp/core/error.hpp"

namespace flaxpp::data {

struct CharText::File {
  int fd = -1;
  explicit File(int d) : fd(d) {}
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() { ::close(fd); }
};

namespace {

// Up to `count` bytes at `offset`, fewer only at the end of the file; retries interrupted reads.
std::size_t read_at(int fd, char* out, std::size_t count, std::int64_t offset,
                    const std::string& path) {
  std::size_t got = 0;
  while (got < count) {
    const ssize_t r =
        ::pread(fd, out + got, count - got, static_cast<off_t>(offset) + static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw ParseError(detail::str(path, ": cannot read (", std::strerror(errno), ")"));
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

}  // namespace

CharText::CharText(const std::string& path, std::int64_t seq_len) : path_(path), seq_len_(seq_len) {
  if (seq_len < 1) throw ValueError(detail::str("CharText: seq_len must be >= 1, got ", seq_len));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ParseError(detail::str(path, ": cannot open (", std::strerror(errno), ")"));
  file_ = std::make_shared<const File>(fd);
  std::array<bool, 256> seen{};
  std::vector<char> block(std::size_t{1} << 20);
  for (;;) {
    const std::size_t n = read_at(fd, block.data(), block.size(), bytes_, path_);
    for (std::size_t i = 0; i < n; ++i)
      seen[static_cast<unsigned char>(block[i])] = true;
    bytes_ += static_cast<std::int64_t>(n);
    if (n < block.size()) break;
  }
  id_.fill(-1);
  for (std::size_t b = 0; b < seen.size(); ++b)
    if (seen[b]) {
      id_[b] = static_cast<std::int32_t>(vocab_.size());
      vocab_.push_back(static_cast<char>(b));
    }
}

Dataset CharText::take(std::span<const std::int64_t> rows) const {
  const std::int64_t n = sequences();
  for (const std::int64_t r : rows)
    if (r < 0 || r >= n)
      throw ValueError(detail::str("CharText::take: sequence ", r, " is out of range for ", path_,
                                   "'s ", n, " sequences; expected indices in [0, ", n, ")"));
  const auto t = static_cast<std::size_t>(seq_len_);
  std::vector<std::int32_t> x(rows.size() * t), y(rows.size() * t);
  std::vector<char> window(t + 1);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const std::int64_t at = rows[k] * seq_len_;
    if (read_at(file_->fd, window.data(), window.size(), at, path_) < window.size())
      throw ParseError(detail::str(path_, " is shorter than the ", bytes_,
                                   " bytes it had when it was opened: it changed while in use"));
    for (std::size_t i = 0; i <= t; ++i) {
      const std::int32_t id = id_[static_cast<unsigned char>(window[i])];
      if (id < 0)
        throw ParseError(detail::str(path_, " has a character at byte ",
                                     at + static_cast<std::int64_t>(i),
                                     " that it did not have when it was opened: it changed "
                                     "while in use"));
      if (i < t) x[k * t + i] = id;
      if (i > 0) y[k * t + i - 1] = id;
    }
  }
  const Shape shape{static_cast<std::int64_t>(rows.size()), seq_len_};
  return {Array::from_vector(x, shape, Device::cpu()), Array::from_vector(y, shape, Device::cpu())};
}

}  // namespace flaxpp::data
