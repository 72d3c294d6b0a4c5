// PNG encoding with stored (uncompressed) deflate blocks; drawing primitives for plots.
#include "flaxpp/io/png.hpp"

#include <array>
#include <cstdlib>
#include <map>

namespace flaxpp::io {
namespace {

std::uint32_t crc32(const std::string& data, std::size_t begin) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = begin; i < data.size(); ++i)
    c = table[(c ^ static_cast<std::uint8_t>(data[i])) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

void put32(std::string& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8)
    out.push_back(static_cast<char>((v >> s) & 0xFF));
}

void chunk(std::string& out, const char* type, const std::string& data) {
  put32(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t start = out.size();
  out += type;
  out += data;
  put32(out, crc32(out, start));
}

// 3x5 glyphs, one row per 3 bits (MSB = left), top row first.
const std::map<char, std::array<std::uint8_t, 5>>& font() {
  static const std::map<char, std::array<std::uint8_t, 5>> f = {
      {'0', {7, 5, 5, 5, 7}}, {'1', {2, 6, 2, 2, 7}}, {'2', {7, 1, 7, 4, 7}},
      {'3', {7, 1, 7, 1, 7}}, {'4', {5, 5, 7, 1, 1}}, {'5', {7, 4, 7, 1, 7}},
      {'6', {7, 4, 7, 5, 7}}, {'7', {7, 1, 1, 1, 1}}, {'8', {7, 5, 7, 5, 7}},
      {'9', {7, 5, 7, 1, 7}}, {'.', {0, 0, 0, 0, 2}}, {'-', {0, 0, 7, 0, 0}},
      {':', {0, 2, 0, 2, 0}}, {'%', {5, 1, 2, 4, 5}}, {'A', {2, 5, 7, 5, 5}},
      {'B', {6, 5, 6, 5, 6}}, {'C', {7, 4, 4, 4, 7}}, {'D', {6, 5, 5, 5, 6}},
      {'E', {7, 4, 6, 4, 7}}, {'F', {7, 4, 6, 4, 4}}, {'G', {7, 4, 5, 5, 7}},
      {'H', {5, 5, 7, 5, 5}}, {'I', {7, 2, 2, 2, 7}}, {'K', {5, 5, 6, 5, 5}},
      {'L', {4, 4, 4, 4, 7}}, {'M', {5, 7, 7, 5, 5}}, {'N', {6, 5, 5, 5, 5}},
      {'O', {7, 5, 5, 5, 7}}, {'P', {7, 5, 7, 4, 4}}, {'R', {6, 5, 6, 5, 5}},
      {'S', {7, 4, 7, 1, 7}}, {'T', {7, 2, 2, 2, 2}}, {'U', {5, 5, 5, 5, 7}},
      {'V', {5, 5, 5, 5, 2}}, {'W', {5, 5, 7, 7, 5}}, {'X', {5, 5, 2, 5, 5}},
      {'Y', {5, 5, 2, 2, 2}}, {'Z', {7, 1, 2, 4, 7}}, {' ', {0, 0, 0, 0, 0}}};
  return f;
}

}  // namespace

Image::Image(int width, int height, Rgb background)
    : width_(width),
      height_(height),
      pixels_(static_cast<std::size_t>(width) * static_cast<std::size_t>(height), background) {}

void Image::set(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  pixels_[static_cast<std::size_t>(y) * static_cast<std::size_t>(width_) +
          static_cast<std::size_t>(x)] = c;
}

void Image::line(int x0, int y0, int x1, int y1, Rgb c) {
  // Bresenham.
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1,
            sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  for (;;) {
    set(x0, y0, c);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) err += dy, x0 += sx;
    if (e2 <= dx) err += dx, y0 += sy;
  }
}

void Image::rect(int x0, int y0, int x1, int y1, Rgb c) {
  for (int y = y0; y <= y1; ++y)
    for (int x = x0; x <= x1; ++x)
      set(x, y, c);
}

void Image::text(int x, int y, const std::string& s, Rgb c, int scale) {
  for (char ch : s) {
    const char up = (ch >= 'a' && ch <= 'z') ? static_cast<char>(ch - 'a' + 'A') : ch;
    const auto it = font().find(up);
    if (it != font().end())
      for (int row = 0; row < 5; ++row)
        for (int col = 0; col < 3; ++col)
          if (it->second[static_cast<std::size_t>(row)] & (4 >> col))
            rect(x + col * scale, y + row * scale, x + (col + 1) * scale - 1,
                 y + (row + 1) * scale - 1, c);
    x += 4 * scale;
  }
}

std::string Image::encode_png() const {
  std::string out = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  put32(ihdr, static_cast<std::uint32_t>(width_));
  put32(ihdr, static_cast<std::uint32_t>(height_));
  ihdr +=
      std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB, deflate, no filter method, no interlace
  chunk(out, "IHDR", ihdr);
  // Raw scanlines (filter byte 0 each), wrapped in zlib with stored deflate blocks.
  std::string raw;
  for (int y = 0; y < height_; ++y) {
    raw.push_back('\0');
    for (int x = 0; x < width_; ++x) {
      const Rgb& p = pixels_[static_cast<std::size_t>(y) * static_cast<std::size_t>(width_) +
                             static_cast<std::size_t>(x)];
      raw.push_back(static_cast<char>(p.r));
      raw.push_back(static_cast<char>(p.g));
      raw.push_back(static_cast<char>(p.b));
    }
  }
  std::string z = "\x78\x01";
  for (std::size_t pos = 0; pos < raw.size() || pos == 0; pos += 65535) {
    const std::size_t len = std::min<std::size_t>(65535, raw.size() - pos);
    z.push_back(pos + len >= raw.size() ? '\x01' : '\x00');
    z.push_back(static_cast<char>(len & 0xFF));
    z.push_back(static_cast<char>(len >> 8));
    z.push_back(static_cast<char>(~len & 0xFF));
    z.push_back(static_cast<char>((~len >> 8) & 0xFF));
    z += raw.substr(pos, len);
    if (raw.empty()) break;
  }
  std::uint32_t a = 1, b = 0;  // Adler-32
  for (char ch : raw) {
    a = (a + static_cast<std::uint8_t>(ch)) % 65521;
    b = (b + a) % 65521;
  }
  put32(z, (b << 16) | a);
  chunk(out, "IDAT", z);
  chunk(out, "IEND", "");
  return out;
}

}  // namespace flaxpp::io
