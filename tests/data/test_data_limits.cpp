// CSV and .npy readers against inputs larger than the host memory (issue 15): refused before
// anything is stored, naming the input; and the in-memory entry points the fuzzers use.
#include <doctest/doctest.h>

#include "harness/host_memory_limit.hpp"

#include <string>

#include "flaxpp/core/error.hpp"
#include "flaxpp/data/csv.hpp"
#include "flaxpp/data/dataset.hpp"
#include "flaxpp/data/npy.hpp"

using namespace flaxpp;
using flaxpp::testing::HostMemoryLimit;

TEST_CASE(
    "parse_csv: CSV text in memory reads as load_csv reads a file, errors naming the source") {
  const data::Dataset ds = data::parse_csv("a,b,label\n1,2,0\n3,4,1\n", "mem.csv");
  CHECK(ds.x.shape() == Shape{2, 2});
  CHECK(ds.y.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1});
  CHECK_THROWS_WITH_AS(data::parse_csv("a,label\n1,x\n", "mem.csv"),
                       doctest::Contains("mem.csv:2: label column 2"), ParseError);
}

TEST_CASE("parse_csv: numbers that would not fit in the host memory are refused before storing") {
  std::string text = "a,label\n";
  for (int i = 0; i < 100000; ++i)
    text += "1,0\n";
  const HostMemoryLimit limit(1 << 20);  // 1 MB; the 200k numbers and their copy take 1.6 MB
  CHECK_THROWS_WITH_AS(
      data::parse_csv(text, "big.csv"),
      "big.csv: storing its up to 200003 numbers needs 1.60 MB of host memory, but "
      "1.05 MB are available",
      ParseError);
}

TEST_CASE("parse_npy: an array that would not fit in the host memory is refused naming its shape") {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (300000,), }";
  header.resize(117, ' ');
  header += '\n';
  std::string file("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(header.size());
  file += '\0';
  file += header;
  file += std::string(1200000, '\0');
  CHECK(data::parse_npy(file, "mem.npy").shape() == Shape{300000});
  const HostMemoryLimit limit(1 << 20);
  CHECK_THROWS_WITH_AS(data::parse_npy(file, "big.npy"),
                       "big.npy: its array of shape (300000,) needs 1.20 MB of host memory, but "
                       "1.05 MB are available",
                       ParseError);
}
