// Fuzz target: the JSON tree/array reader (io/json), as `flaxpp train` meets it in a JSON
// checkpoint (decode_checkpoint, then resuming training from it) and as reference files carry
// arrays and trees (array_from_json, tree_from_json on any JSON value).
#include "harness.hpp"

using namespace flaxpp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::resume_from_bytes(data, size, io::CheckpointFormat::json);
  fuzz::with_json(data, size, [](const io::Json& j) {
    fuzz::expect_read_or_refused([&] { io::tree_from_json(j); });
    fuzz::expect_read_or_refused([&] { io::array_from_json(j); });
  });
  return 0;
}
