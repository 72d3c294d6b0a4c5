// Fuzz target: the reference-case document (format flaxpp.refs/1) as `flaxpp check` runs it:
// the document checks, every case's inputs through the built-in problems (which compute, within
// the harness's memory budget and a one-second case limit) and the comparison with "expected".
#include "harness.hpp"

#include "flaxpp/io/refs.hpp"

using namespace flaxpp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::with_json(data, size, [](const io::Json& doc) {
    refs::CheckOptions options;
    options.case_timeout = std::chrono::seconds(1);
    // Case failures are results, not exceptions: check_document itself must not throw.
    refs::check_document(doc, "fuzz.json", Device::cpu(), refs::ProblemRegistry::builtin(),
                         options);
  });
  return 0;
}
