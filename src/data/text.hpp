// src/data/text.hpp — what the CSV and .npy readers share about text from a file: blanks trimmed,
// and bytes quoted for an error message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace flaxpp::data::text {

// `s` without its leading and trailing spaces and tabs.
inline std::string_view trim(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && blank(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && blank(s.back()))
    s.remove_suffix(1);
  return s;
}

// Text from a file for an error message: quoted, other bytes than printable ASCII as \xNN,
// and shortened so one bad line (or a binary file) cannot flood the message.
inline std::string quoted(std::string_view s) {
  constexpr std::size_t kMax = 40;
  constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char c : s.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    }
  }
  out += s.size() > kMax ? "...\"" : "\"";
  return out;
}

}  // namespace flaxpp::data::text
