// Fuzz target: the Flax msgpack reader (and the msgpack wire decoder under it), on the path
// `flaxpp train` takes when it resumes from a .msgpack checkpoint (decode, restore the train
// state, train a step).
#include "harness.hpp"

using namespace flaxpp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::resume_from_bytes(data, size, io::CheckpointFormat::msgpack);
  return 0;
}
