// What the fuzz targets share: a small host-memory budget (so that every refusal path is
// reached quickly and nothing takes the machine), the one rule they check — an input is either
// read or refused with a flaxpp::Error; any other exception, a crash or a sanitizer report is a
// finding — JSON parsing as the readers do it, and the path the CLI takes after it decodes a
// checkpoint. Each target includes it once (it defines the target's LLVMFuzzerInitialize).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "flaxpp/core/error.hpp"
#include "flaxpp/core/tree.hpp"
#include "flaxpp/io/checkpoint.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/nn/mlp.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/transform.hpp"
#include "src/tools/mlp_apply.hpp"
#include "flaxpp/train/train_state.hpp"

// The environment every target runs in.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // Readers and reference cases refuse what would need more than this: 32 MB keeps every
  // input fast, and a refusal is as good a result as a read.
  ::setenv("FLAXPP_HOST_MEMORY_LIMIT", "33554432", 1);
  ::setenv("FLAXPP_DEVICE", "cpu", 1);
  // One thread for every product, whichever engine computes it (oneDNN's OpenMP, OpenBLAS).
  ::setenv("FLAXPP_NUM_THREADS", "1", 1);
  return 0;
}

namespace flaxpp::fuzz {

inline std::string_view bytes_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `read`; a flaxpp::Error (ParseError, ValueError, ...) is a clean refusal. Anything else
// propagates, and libFuzzer reports the input.
template <class F>
void expect_read_or_refused(F&& read) {
  try {
    read();
  } catch (const Error&) {
  }
}

// JSON text as the readers parse it: refused (ParseError) when it would not fit in memory,
// nothing when it is not JSON.
inline std::optional<io::Json> parse_json(std::string_view text) {
  io::check_json_memory(text, "fuzz.json");
  io::Json j = io::Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// Runs `use` on the input parsed as JSON (when it is JSON), refusals allowed.
template <class F>
void with_json(const std::uint8_t* data, std::size_t size, F&& use) {
  expect_read_or_refused([&] {
    if (const std::optional<io::Json> j = parse_json(bytes_of(data, size))) use(*j);
  });
}

// What `flaxpp train` does with a checkpoint it resumes from: restore the train state against
// its optimiser (adam), then take a step and evaluate (a 2 -> 3 MLP on a batch of 2). Throws
// flaxpp::Error when the checkpoint does not fit the model.
inline void resume_training(const Tree& checkpoint) {
  train::ClassifierStep step(
      train::mlp_apply(nn::MLP{.features = {3}}, checkpoint_policies::none()), optim::adam(0.01));
  train::TrainState state = step.restore(checkpoint);
  const Array x = Array::from_vector(std::vector<float>{0.5f, -1.0f, 0.25f, 2.0f}, Shape{2, 2});
  const Array y = Array::from_vector(std::vector<std::int32_t>{0, 2}, Shape{2});
  step(state, x, y);
  step.evaluate(state.params, x, y);
}

// A checkpoint file's bytes on the path of `flaxpp train` resuming from it.
inline void resume_from_bytes(const std::uint8_t* data, std::size_t size,
                              io::CheckpointFormat format) {
  expect_read_or_refused([&] {
    resume_training(io::decode_checkpoint(
        bytes_of(data, size), format, detail::str("fuzz.", io::checkpoint_format_name(format))));
  });
}

}  // namespace flaxpp::fuzz
