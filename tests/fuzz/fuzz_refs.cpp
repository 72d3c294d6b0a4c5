// Fuzz target: the reference-case document (format flaxpp.refs/1) as `flaxpp check` runs it:
// the document checks, every case's inputs through the built-in problems (which compute, within
// the harness's memory budget and short time limits) and the comparison with "expected".
#include "harness.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "flaxpp/io/refs.hpp"

using namespace flaxpp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::with_json(data, size, [](const io::Json& doc) {
    // Fast limits, so that the fuzzer spends its time on the document's shapes, not on
    // computing: 20 ms per case and half a second per document (then a CaseTimeout ends it).
    refs::CheckOptions options;
    options.case_timeout = std::chrono::milliseconds(20);
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    options.on_case_start = [end](const std::string&) {
      if (std::chrono::steady_clock::now() > end) throw refs::CaseTimeout("document budget spent");
    };
    // A failing case is a result; one that failed with something other than a flaxpp::Error
    // is a finding.
    options.on_case_done = [](const refs::CaseResult& result) {
      if (result.internal_error) {
        std::fprintf(stderr, "%s\n", result.message.c_str());
        std::abort();
      }
    };
    refs::check_document(doc, "fuzz.json", Device::cpu(), refs::ProblemRegistry::builtin(),
                         options);
  });
  return 0;
}
