// libFuzzer target: the `flaxpp train` config, parsed as the CLI parses it
// (io::parse_train_config: JSON, then every section, the optimiser and remat policy specs).
// A refusal is a flaxpp::Error; any other exception escaping, a crash or a sanitizer report is
// a finding. Seeds: corpus/train_config/; dictionary: train_config.dict.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flaxpp/io/train_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const flaxpp::io::TrainConfig config = flaxpp::io::parse_train_config(text, "config.json");
    // What the CLI derives from a parsed config.
    (void)config.checkpoint_path();
    (void)config.run_identity().dump();
  } catch (const flaxpp::Error&) {
    // A clear refusal: what bad input should get.
  }
  return 0;
}
