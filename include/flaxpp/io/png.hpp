// flaxpp/io/png.hpp — a minimal RGB image and a PNG encoder (uncompressed deflate blocks, so
// no zlib dependency), for the plots `flaxpp train` writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flaxpp::io {

struct Rgb {
  std::uint8_t r = 255, g = 255, b = 255;
};

class Image {
 public:
  Image(int width, int height, Rgb background = {});
  int width() const { return width_; }
  int height() const { return height_; }
  void set(int x, int y, Rgb c);  // ignores pixels outside the image
  void line(int x0, int y0, int x1, int y1, Rgb c);
  void rect(int x0, int y0, int x1, int y1, Rgb c);  // filled, inclusive
  // Upper-case letters, digits and . - : % in a 3x5 pixel font, scaled.
  void text(int x, int y, const std::string& s, Rgb c, int scale = 2);
  // The PNG file's bytes (8-bit RGB).
  std::string encode_png() const;

 private:
  int width_, height_;
  std::vector<Rgb> pixels_;
};

}  // namespace flaxpp::io
