// Byte sizes as configs and the command line write them (memory budgets).
#include <doctest/doctest.h>

#include <string>

#include "flaxpp/core/error.hpp"
#include "flaxpp/io/byte_size.hpp"

using namespace flaxpp;

TEST_CASE("byte size: decimal and binary units, decimals rounded down") {
  CHECK(io::parse_byte_size("1000000", "budget") == 1000000);
  CHECK(io::parse_byte_size("48MiB", "budget") == 48 * 1024 * 1024);
  CHECK(io::parse_byte_size("1.5GiB", "budget") == 3 * 512 * 1024 * 1024LL);
  CHECK(io::parse_byte_size("64kB", "budget") == 64000);
  CHECK(io::parse_byte_size("2 MB", "budget") == 2000000);
  CHECK(io::parse_byte_size("10.7B", "budget") == 10);
  CHECK(io::parse_byte_size("1KiB", "budget") == 1024);
}

TEST_CASE("byte size: what is not one is a ParseError naming the setting, the text and the form") {
  for (const char* bad : {"", "-5MiB", "0", "0.4", "MiB", "12 mb", "1e400", "48MiBs", "nan"}) {
    CAPTURE(bad);
    try {
      (void)io::parse_byte_size(bad, "$.memory_budget");
      FAIL("expected a ParseError");
    } catch (const ParseError& e) {
      const std::string what = e.what();
      CHECK(what.find("$.memory_budget") != std::string::npos);
      CHECK(what.find(std::string("got \"") + bad + "\"") != std::string::npos);
      CHECK(what.find("48MiB") != std::string::npos);
    }
  }
}
