// flaxpp/data/char_text.hpp — a text file as a character-level language model's data, read
// from the file a batch at a time, so that memory does not grow with the text.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "flaxpp/data/dataset.hpp"

namespace flaxpp::data {

// The file's bytes are its characters. The vocabulary is the distinct bytes in increasing
// order, a character's token id its position there. Sequence r is the seq_len + 1 characters
// from byte r * seq_len: x its first seq_len ids, y its last seq_len (each position's next
// character). The last bytes that do not fill a sequence are left out.
//
// Only the vocabulary is held: take() reads the rows it gathers from the file (positioned
// reads, safe from several threads), so that a 50 MB text needs no more memory than a 50 kB one.
class CharText {
 public:
  // Reads the file once, in blocks, for its vocabulary, and keeps it open. Throws ParseError
  // naming the file when it cannot be opened or read, ValueError when seq_len < 1.
  CharText(const std::string& path, std::int64_t seq_len);

  const std::string& path() const { return path_; }
  std::int64_t bytes() const { return bytes_; }
  std::int64_t seq_len() const { return seq_len_; }
  // (bytes - 1) / seq_len: every sequence needs the character after its last.
  std::int64_t sequences() const { return bytes_ > 0 ? (bytes_ - 1) / seq_len_ : 0; }
  const std::string& vocab() const { return vocab_; }

  // Sequences `rows` in the order given (repeats allowed): x and y int32 [rows, seq_len] on
  // the host. Throws ValueError for a row outside [0, sequences()), ParseError when the file
  // changed since it was opened (shorter now, or a byte outside the vocabulary).
  Dataset take(std::span<const std::int64_t> rows) const;

 private:
  struct File;
  std::string path_;
  std::int64_t seq_len_ = 0, bytes_ = 0;
  std::string vocab_;
  std::array<std::int32_t, 256> id_{};  // -1 for bytes outside the vocabulary
  std::shared_ptr<const File> file_;
};

}  // namespace flaxpp::data
