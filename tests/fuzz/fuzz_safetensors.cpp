// Fuzz target: the safetensors reader, on the path `flaxpp train` takes when it resumes from a
// .safetensors checkpoint (decode, restore the train state, train a step).
#include "harness.hpp"

using namespace flaxpp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::resume_from_bytes(data, size, io::CheckpointFormat::safetensors);
  return 0;
}
