// Fuzz target: the NumPy .npy reader (every format version, dtype and header form).
#include "harness.hpp"

#include "flaxpp/data/npy.hpp"

using namespace flaxpp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::expect_read_or_refused(
      [&] { data::parse_npy(fuzz::bytes_of(data, size), "fuzz.npy").to_vector<float>(); });
  return 0;
}
